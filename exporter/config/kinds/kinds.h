#pragma once

// The probe kinds' sections of the configuration (probes.<kind>), one decoder per kind in
// config/kinds/<kind>.cc, each reading its section into its Config member (absent: the kind is
// off) and reporting every problem in `d` with its key path. config.cc's DecodeProbes calls
// them. Internal to the config module.

#include <yaml-cpp/yaml.h>

#include <string>

#include "exporter/config/config.h"
#include "exporter/config/decoder.h"

namespace podnet::config {

void DecodeRtt(Decoder& d, const YAML::Node& n, Config& c);
/// `kubernetes`: the file has a peers.kubernetes section (cluster_dns and sample need it).
void DecodeDns(Decoder& d, const YAML::Node& n, bool kubernetes, Config& c);
void DecodeBurst(Decoder& d, const YAML::Node& n, Config& c);
void DecodeHttp(Decoder& d, const YAML::Node& n, Config& c);
void DecodeGrpc(Decoder& d, const YAML::Node& n, Config& c);
void DecodeService(Decoder& d, const YAML::Node& n, Config& c);
void DecodeMtu(Decoder& d, const YAML::Node& n, Config& c);

/// Whether this build has gRPC; without it, a configuration that asks for it (probes.grpc,
/// responders.grpc, at `n` and `path`) fails in `d` instead of being ignored.
bool GrpcBuilt(Decoder& d, const YAML::Node& n, const std::string& path);

}  // namespace podnet::config
