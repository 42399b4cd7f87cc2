#include "exporter/web/tls_context.h"

#include <openssl/ssl.h>

#include <stdexcept>

#include "exporter/config/read_file.h"

namespace podnet::web {
namespace {

namespace ssl = boost::asio::ssl;
constexpr std::size_t kMaxPemBytes = 1024 * 1024;

std::optional<std::string> Read(const std::string& what, const std::string& path,
                                std::string* error) {
  std::string why;
  auto text = config::ReadRegularFile(path, kMaxPemBytes, &why);
  if (!text) *error = what + " " + path + ": " + why;
  return text;
}

// RequestClientCert and RequireAnyClientCert ask for a certificate without verifying it.
int AcceptAny(int, X509_STORE_CTX*) { return 1; }

// Whether and how a client's certificate is asked for and verified (client_auth_type, as Go's
// tls.ClientAuthType).
void SetClientVerify(ssl::context& ctx, ClientAuth auth) {
  SSL_CTX* native = ctx.native_handle();
  switch (auth) {
    case ClientAuth::kNoClientCert:
      ctx.set_verify_mode(ssl::verify_none);
      break;
    case ClientAuth::kRequestClientCert:
      SSL_CTX_set_verify(native, SSL_VERIFY_PEER, AcceptAny);
      break;
    case ClientAuth::kRequireAnyClientCert:
      SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, AcceptAny);
      break;
    case ClientAuth::kVerifyClientCertIfGiven:
      ctx.set_verify_mode(ssl::verify_peer);
      break;
    case ClientAuth::kRequireAndVerifyClientCert:
      ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
      break;
  }
}

}  // namespace

std::shared_ptr<ssl::context> LoadTlsContext(const TlsServerConfig& tls, std::string* error) {
  auto cert = Read("cert_file", tls.cert_file, error);
  if (!cert) return nullptr;
  auto key = Read("key_file", tls.key_file, error);
  if (!key) return nullptr;
  std::optional<std::string> ca;
  if (!tls.client_ca_file.empty()) {
    ca = Read("client_ca_file", tls.client_ca_file, error);
    if (!ca) return nullptr;
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  auto fail = [&](const std::string& what) {
    *error = what + ": " + ec.message();
    return nullptr;
  };
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::single_dh_use,
                   ec);
  if (ec) return fail("TLS options");
  SSL_CTX* native = ctx->native_handle();
  if (SSL_CTX_set_min_proto_version(native, tls.min_version) != 1 ||
      (tls.max_version && SSL_CTX_set_max_proto_version(native, tls.max_version) != 1)) {
    *error = "TLS versions: OpenSSL refused them";
    return nullptr;
  }
  if (!tls.cipher_list.empty() && SSL_CTX_set_cipher_list(native, tls.cipher_list.c_str()) != 1) {
    *error = "cipher_suites: OpenSSL supports none of " + tls.cipher_list;
    return nullptr;
  }
  if (tls.prefer_server_cipher_suites) SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE);
  ctx->use_certificate_chain(boost::asio::buffer(*cert), ec);
  if (ec) return fail("cert_file " + tls.cert_file);
  ctx->use_private_key(boost::asio::buffer(*key), ssl::context::pem, ec);
  if (ec) return fail("key_file " + tls.key_file);
  if (SSL_CTX_check_private_key(native) != 1) {
    *error = "key_file " + tls.key_file + " does not match the certificate of " + tls.cert_file;
    return nullptr;
  }
  if (ca) {
    ctx->add_certificate_authority(boost::asio::buffer(*ca), ec);
    if (ec) return fail("client_ca_file " + tls.client_ca_file);
    // The CA subjects a client is told to choose its certificate by.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(native, names);
    }
  }
  SetClientVerify(*ctx, tls.client_auth);
  return ctx;
}

TlsContextSource::TlsContextSource(std::shared_ptr<const TlsServerConfig> tls)
    : tls_(std::move(tls)) {
  stamps_ = Stamps();
  std::string error;
  current_ = LoadTlsContext(*tls_, &error);
  if (!current_) throw std::runtime_error(error);
}

std::shared_ptr<boost::asio::ssl::context> TlsContextSource::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

std::vector<TlsContextSource::Stamp> TlsContextSource::Stamps() const {
  std::vector<Stamp> out;
  for (const std::string* path : {&tls_->cert_file, &tls_->key_file, &tls_->client_ca_file}) {
    Stamp s;
    struct stat st {};
    if (!path->empty() && stat(path->c_str(), &st) == 0) {
      s = {st.st_dev, st.st_ino, st.st_size,
           static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec};
    }
    out.push_back(s);
  }
  return out;
}

bool TlsContextSource::Refresh(std::string* error) {
  auto now = Stamps();
  if (now == stamps_) return false;
  stamps_ = now;  // one try per change: a broken file is reported once, not every look
  auto next = LoadTlsContext(*tls_, error);
  if (!next) return false;
  std::lock_guard lock(mu_);
  current_ = std::move(next);
  return true;
}

}  // namespace podnet::web
