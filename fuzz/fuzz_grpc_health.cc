// A gRPC peer's grpc.health.v1.HealthCheckResponse bytes, as the gRPC probe decodes them
// (probes::grpc::DecodeHealthStatus): any bytes give a status or "not a message", never more.
#include <cstddef>
#include <cstdint>
#include <span>

#include "exporter/probes/grpc/grpc_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)podnet::probes::grpc::DecodeHealthStatus(std::span<const std::uint8_t>(data, size));
  return 0;
}
