#pragma once

// HTTP basic authentication (RFC 7617) against exporter-toolkit's basic_auth_users: bcrypt
// hashes, verified with libxcrypt's crypt_r(3) — never a hand-rolled bcrypt.

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace podnet::web {

class BasicAuth {
 public:
  /// `users`: user name → bcrypt hash ($2a$/$2b$/$2y$, checked by ParseWebConfig).
  explicit BasicAuth(std::map<std::string, std::string> users);

  /// Whether an Authorization header value ("Basic base64(user:password)") names a user and
  /// that user's password. Malformed values are false. bcrypt is slow on purpose (cost 10:
  /// tens of ms), so a verified (user, password) pair is remembered (as a SHA-256 of both, up to
  /// 256 pairs) and costs a hash lookup the next time; an unknown user costs one bcrypt too, so
  /// that timing does not tell which users exist. Thread-safe.
  bool Check(std::string_view authorization);

  /// The user name of an Authorization header value, "" when it is not Basic.
  static std::string User(std::string_view authorization);

 private:
  std::map<std::string, std::string> users_;
  std::mutex mu_;
  std::set<std::string> verified_;  // SHA-256(user ":" password ":" hash) of good pairs
};

}  // namespace podnet::web
