#include "exporter/metrics/families.h"

namespace podnet::metrics {

CounterFamily& DeclareCounter(prometheus::Registry& registry, const std::string& name,
                              const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

GaugeFamily& DeclareGauge(prometheus::Registry& registry, const std::string& name,
                          const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

HistogramFamily DeclareHistogram(prometheus::Registry& registry, const std::string& name,
                                 const std::string& help, const std::vector<double>& buckets) {
  return {prometheus::BuildHistogram().Name(name).Help(help).Register(registry), buckets};
}

}  // namespace podnet::metrics
