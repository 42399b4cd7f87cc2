#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace podnet::config {

/// Reads a whole file that an operator points us at (the configuration, a kubeconfig and the
/// token and certificate files it names, the report files of `report --input/--baseline`), as
/// hostile input: only a regular file is read (a FIFO
/// is never waited on — open(2) with O_NONBLOCK — and a device such as /dev/zero is refused), and
/// at most `max_bytes`. std::nullopt and *error (without the path) otherwise, e.g. "it is a FIFO
/// (only regular files are read)", "8388637 bytes is more than the limit of 524288 bytes", or
/// strerror(errno).
std::optional<std::string> ReadRegularFile(const std::string& path, std::size_t max_bytes,
                                           std::string* error);

}  // namespace podnet::config
