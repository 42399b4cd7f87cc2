#include "exporter/web/web_config.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <string>

#include "tests/unit/testing/htpasswd.h"

namespace podnet::web {
namespace {

using testing::kAliceBcrypt;  // "correct horse"

std::string Errors(const WebConfigResult& r) {
  std::string all;
  for (const auto& e : r.errors) all += e.ToString() + "\n";
  return all;
}

TEST(WebConfigTest, FullFileAsExporterToolkitDocumentsIt) {
  auto r = ParseWebConfig(std::string("tls_server_config:\n"
                                      "  cert_file: server.crt\n"
                                      "  key_file: /abs/server.key\n"
                                      "  client_auth_type: VerifyClientCertIfGiven\n"
                                      "  client_ca_file: ../ca/ca.crt\n"
                                      "  min_version: TLS13\n"
                                      "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,\n"
                                      "                  TLS_RSA_WITH_AES_256_CBC_SHA]\n"
                                      "http_server_config:\n"
                                      "  http2: false\n"
                                      "  headers: {X-Frame-Options: SAMEORIGIN}\n"
                                      "basic_auth_users:\n"
                                      "  alice: ") +
                              kAliceBcrypt + "\n",
                          "/etc/podnet/web/web.yml");
  ASSERT_TRUE(r.config) << Errors(r);
  const auto& tls = *r.config->tls;
  EXPECT_EQ(tls.cert_file, "/etc/podnet/web/server.crt");  // relative to the file's directory
  EXPECT_EQ(tls.key_file, "/abs/server.key");
  EXPECT_EQ(tls.client_ca_file, "/etc/podnet/ca/ca.crt");
  EXPECT_EQ(tls.client_auth, ClientAuth::kVerifyClientCertIfGiven);
  EXPECT_EQ(tls.min_version, TLS1_3_VERSION);
  EXPECT_EQ(tls.cipher_list, "ECDHE-RSA-AES128-GCM-SHA256:AES256-SHA");
  ASSERT_EQ(r.config->headers.size(), 1u);
  EXPECT_EQ(r.config->headers[0].second, "SAMEORIGIN");
  EXPECT_EQ(r.config->users.at("alice"), kAliceBcrypt);
}

TEST(WebConfigTest, EmptyFileIsPlainHttpWithoutAuth) {
  auto r = ParseWebConfig("", "web.yml");
  ASSERT_TRUE(r.config) << Errors(r);
  EXPECT_FALSE(r.config->tls);
  EXPECT_TRUE(r.config->users.empty());
  EXPECT_EQ(ParseWebConfig("tls_server_config:\n", "web.yml").config->tls, nullptr);
}

struct BadCase {
  const char* name;
  const char* text;
  const char* want;  // in the error text, with its place
};

class WebConfigBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(WebConfigBadTest, RefusedWithPlaceAndKey) {
  auto r = ParseWebConfig(GetParam().text, "web.yml");
  EXPECT_FALSE(r.config);
  EXPECT_NE(Errors(r).find(GetParam().want), std::string::npos) << Errors(r);
}

INSTANTIATE_TEST_SUITE_P(
    Table, WebConfigBadTest,
    ::testing::Values(
        BadCase{"unknown_top", "tls_config: {}\n", "web.yml:1:1: tls_config: unknown key"},
        BadCase{"no_cert", "tls_server_config:\n  key_file: k\n",
                "tls_server_config.cert_file: missing"},
        BadCase{"auth_type",
                "tls_server_config: {cert_file: c, key_file: k, "
                "client_auth_type: Required}\n",
                "1:66: tls_server_config.client_auth_type: must be NoClientCert"},
        BadCase{"verify_without_ca",
                "tls_server_config:\n  cert_file: c\n  key_file: k\n"
                "  client_auth_type: RequireAndVerifyClientCert\n",
                "4:21: tls_server_config.client_ca_file: missing"},
        BadCase{"max_below_min",
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n"
                "  max_version: TLS12\n",
                "5:16: tls_server_config.max_version: is below min_version"},
        BadCase{"cipher",
                "tls_server_config:\n  cert_file: c\n  key_file: k\n"
                "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
                "4:19: tls_server_config.cipher_suites[0]: unknown TLS 1.2 cipher suite"},
        BadCase{"nosniff", "http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
                "3:29: http_server_config.headers.X-Content-Type-Options: must be nosniff"},
        BadCase{"header_injection",
                "http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\r\\nX: y\"\n",
                "must be one line"},
        BadCase{"cleartext_password", "basic_auth_users:\n  alice: correct horse\n",
                "2:10: basic_auth_users.alice: must be a bcrypt hash"},
        BadCase{"md5_crypt", "basic_auth_users:\n  alice: $1$saltsalt$abcdefghijklmnopqrstu.\n",
                "must be a bcrypt hash"},
        BadCase{"colon_user",
                "basic_auth_users:\n  \"a:b\": $2y$10$yvLRgfwHg35RmbzkbRjNJ.AHEv4ag.i6QwjkFMuX4m"
                "AlKidQ/ko4S\n",
                "without ':'"},
        BadCase{"not_yaml", "tls_server_config: [\n", "web.yml:1:20: malformed YAML"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace podnet::web
