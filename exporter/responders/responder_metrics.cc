#include "exporter/responders/responder_metrics.h"

namespace podnet::responders {

prometheus::Family<prometheus::Counter>& ResponderRequests(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("podnet_responder_requests_total")
      .Help("Requests served by this Pod's responders, by outcome.")
      .Register(registry);
}

prometheus::Family<prometheus::Counter>& ResponderDropped(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("podnet_responder_dropped_total")
      .Help("Requests this Pod's responders received and did not answer, by reason.")
      .Register(registry);
}

ResponderDrop::ResponderDrop(prometheus::Registry& registry, const std::string& responder,
                             const std::string& result, const std::string& reason)
    : requests(&ResponderRequests(registry).Add({{"responder", responder}, {"result", result}})),
      dropped(&ResponderDropped(registry).Add({{"responder", responder}, {"reason", reason}})) {}

}  // namespace podnet::responders
