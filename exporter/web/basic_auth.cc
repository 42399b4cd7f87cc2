#include "exporter/web/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstring>
#include <optional>
#include <utility>

namespace podnet::web {
namespace {

constexpr std::size_t kMaxVerified = 256;

// A hash no password matches, for unknown users (cost 10 like a typical real one).
constexpr char kDummyHash[] = "$2b$10$eEhYUQY11JetoQH.1ioqXu9GC.KghYFitqUirJtr/IZdGyEtGaiGm";

// user and password of "Basic <base64(user:password)>"; std::nullopt when malformed.
std::optional<std::pair<std::string, std::string>> Decode(std::string_view value) {
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
  return std::make_pair(out.substr(0, colon), out.substr(colon + 1));
}

bool BcryptMatches(const std::string& password, const char* hash) {
  auto data = std::make_unique<crypt_data>();  // ~32 KiB: not on the stack
  const char* out = crypt_r(password.c_str(), hash, data.get());
  std::size_t len = std::strlen(hash);
  // crypt_r returns a string starting with '*' on failure, never the hash.
  return out && std::strlen(out) == len && CRYPTO_memcmp(out, hash, len) == 0;
}

std::string Sha256(const std::string& s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return std::string(reinterpret_cast<char*>(digest), sizeof digest);
}

}  // namespace

BasicAuth::BasicAuth(std::map<std::string, std::string> users) : users_(std::move(users)) {}

std::string BasicAuth::User(std::string_view authorization) {
  auto up = Decode(authorization);
  return up ? up->first : "";
}

bool BasicAuth::Check(std::string_view authorization) {
  auto up = Decode(authorization);
  if (!up) return false;
  auto it = users_.find(up->first);
  if (it == users_.end()) {
    BcryptMatches(up->second, kDummyHash);
    return false;
  }
  std::string key = Sha256(up->first + ":" + up->second + ":" + it->second);
  {
    std::lock_guard lock(mu_);
    if (verified_.count(key)) return true;
  }
  if (!BcryptMatches(up->second, it->second.c_str())) return false;
  std::lock_guard lock(mu_);
  if (verified_.size() >= kMaxVerified) verified_.clear();
  verified_.insert(std::move(key));
  return true;
}

}  // namespace podnet::web
