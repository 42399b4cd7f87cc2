#pragma once

// HTTP basic authentication (RFC 7617) against exporter-toolkit's basic_auth_users: bcrypt
// hashes, verified with libxcrypt's crypt_r(3) — never a hand-rolled bcrypt.

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace podnet::web {

/// The user and password of an Authorization header value.
struct Credentials {
  std::string user;
  std::string password;  // may hold ':' (only the first colon separates, RFC 7617 §2)
};

/// Decodes "Basic base64(user:password)" (the scheme in any case, at most 4096 bytes).
/// std::nullopt when the value is not that.
std::optional<Credentials> DecodeBasic(std::string_view authorization);

class BasicAuth {
 public:
  /// `users`: user name → bcrypt hash ($2a$/$2b$/$2y$, checked by ParseWebConfig).
  explicit BasicAuth(std::map<std::string, std::string> users);

  /// The hash `c.user`'s password is checked against: the user's, or for an unknown user a
  /// hash no password matches, of the same cost as a typical real one (cost 10), so that an
  /// unknown user costs as much as a known one and timing does not tell which users exist.
  const std::string& HashFor(const Credentials& c) const;

  /// SHA-256 of user, password and HashFor(c) (32 bytes): what remembers a checked pair
  /// without keeping the password. Microseconds; the same work for known and unknown users.
  std::string Key(const Credentials& c) const;

  /// Whether `password` matches the bcrypt `hash` (crypt_r). Slow on purpose: tens of ms at
  /// cost 10, more on a busy CPU; never on a loop that answers peers or builds scrapes
  /// (web/auth_gate.h bounds how many run). Thread-safe (no state).
  static bool Matches(const std::string& password, const std::string& hash);

  /// The user name of an Authorization header value, "" when it is not Basic.
  static std::string User(std::string_view authorization);

 private:
  std::map<std::string, std::string> users_;
};

}  // namespace podnet::web
