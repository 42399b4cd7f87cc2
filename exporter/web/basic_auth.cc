#include "exporter/web/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cctype>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

namespace podnet::web {
namespace {

// A hash no password matches, for unknown users (cost 10 like a typical real one).
const std::string kDummyHash = "$2b$10$eEhYUQY11JetoQH.1ioqXu9GC.KghYFitqUirJtr/IZdGyEtGaiGm";

std::string Sha256(const std::string& s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return std::string(reinterpret_cast<char*>(digest), sizeof digest);
}

}  // namespace

std::optional<Credentials> DecodeBasic(std::string_view value) {
  constexpr std::string_view kScheme = "basic ";
  if (value.size() <= kScheme.size() || value.size() > 4096) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {  // the scheme is case-insensitive
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return std::nullopt;
  }
  std::string_view b64 = value.substr(kScheme.size());
  while (!b64.empty() && b64.front() == ' ') b64.remove_prefix(1);
  if (b64.empty() || b64.size() % 4 != 0) return std::nullopt;
  std::string out(b64.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  if (n < 0) return std::nullopt;
  std::size_t len = static_cast<std::size_t>(n);
  if (b64.size() >= 1 && b64[b64.size() - 1] == '=') --len;  // EVP_DecodeBlock keeps padding
  if (b64.size() >= 2 && b64[b64.size() - 2] == '=') --len;
  out.resize(len);
  std::size_t colon = out.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return Credentials{out.substr(0, colon), out.substr(colon + 1)};
}

BasicAuth::BasicAuth(std::map<std::string, std::string> users) : users_(std::move(users)) {}

std::string BasicAuth::User(std::string_view authorization) {
  auto c = DecodeBasic(authorization);
  return c ? c->user : "";
}

const std::string& BasicAuth::HashFor(const Credentials& c) const {
  auto it = users_.find(c.user);
  return it == users_.end() ? kDummyHash : it->second;
}

std::string BasicAuth::Key(const Credentials& c) const {
  return Sha256(c.user + ":" + c.password + ":" + HashFor(c));
}

bool BasicAuth::Matches(const std::string& password, const std::string& hash) {
  auto data = std::make_unique<crypt_data>();  // ~32 KiB: not on the stack
  const char* out = crypt_r(password.c_str(), hash.c_str(), data.get());
  // crypt_r returns a string starting with '*' on failure, never the hash.
  return out && std::strlen(out) == hash.size() &&
         CRYPTO_memcmp(out, hash.data(), hash.size()) == 0;
}

}  // namespace podnet::web
