#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

namespace podnet::responders {

// The families every responder adds its series to. prometheus-cpp hands back the registered
// family when a second responder registers the same name with the same help, and throws when
// the help differs: so it is written once, here.

/// podnet_responder_requests_total{responder, result}: requests served, by outcome.
inline prometheus::Family<prometheus::Counter>& ResponderRequests(prometheus::Registry& r) {
  return prometheus::BuildCounter()
      .Name("podnet_responder_requests_total")
      .Help("Requests served by this Pod's responders, by outcome.")
      .Register(r);
}

/// podnet_responder_dropped_total{responder, reason}: requests (or connections) received and
/// not answered.
inline prometheus::Family<prometheus::Counter>& ResponderDropped(prometheus::Registry& r) {
  return prometheus::BuildCounter()
      .Name("podnet_responder_dropped_total")
      .Help("Requests this Pod's responders received and did not answer, by reason.")
      .Register(r);
}

}  // namespace podnet::responders
