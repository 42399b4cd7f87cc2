#pragma once

// The TLS side of the web configuration: an OpenSSL server context built from
// tls_server_config, and its re-reading when the certificate files change on disk
// (cert-manager and the kubelet replace them in place, behind a symlink).

#include <sys/stat.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exporter/web/web_config.h"

namespace podnet::web {

/// A server context for `tls`: certificate chain and key (which must match), protocol
/// versions, TLS 1.2 cipher list, and client certificate verification with the client CA
/// (its subjects sent as acceptable CAs). Files are read as hostile input (regular files,
/// at most 1 MiB each). nullptr and *error (naming the file and OpenSSL's reason) when a file
/// cannot be read or OpenSSL refuses it.
std::shared_ptr<boost::asio::ssl::context> LoadTlsContext(const TlsServerConfig& tls,
                                                          std::string* error);

/// The context in use, and a check for changed files. Current() may be called from any
/// thread; Refresh() from one thread at a time.
class TlsContextSource {
 public:
  /// Builds the first context; throws std::runtime_error with the reason when it cannot.
  explicit TlsContextSource(std::shared_ptr<const TlsServerConfig> tls);

  std::shared_ptr<boost::asio::ssl::context> Current() const;

  /// When a file's identity (device, inode, size, modification time, followed through
  /// symlinks) changed since the last look, builds a new context and swaps it in: new
  /// connections use it, open ones keep theirs. A context that cannot be built leaves the old
  /// one in use, and *error says why. Returns true when it swapped.
  bool Refresh(std::string* error);

 private:
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    long long mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  std::vector<Stamp> Stamps() const;

  std::shared_ptr<const TlsServerConfig> tls_;
  std::vector<Stamp> stamps_;  // of the files the current context, or the last try, read
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;
};

}  // namespace podnet::web
