#include "exporter/metrics/families.h"

#include "exporter/metrics/metrics.h"

namespace podnet::metrics {

CounterFamily& DeclareCounter(Metrics& metrics, const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(metrics.RegistryFor(name));
}

GaugeFamily& DeclareGauge(Metrics& metrics, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(metrics.RegistryFor(name));
}

HistogramFamily DeclareHistogram(Metrics& metrics, const std::string& name, const std::string& help,
                                 const std::vector<double>& buckets) {
  auto& family =
      prometheus::BuildHistogram().Name(name).Help(help).Register(metrics.RegistryFor(name));
  return {family, buckets, name, metrics.NativeStoreFor(name)};
}

}  // namespace podnet::metrics
