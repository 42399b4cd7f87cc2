// The exporter's HTTP route table: what each path is, its methods, and what stays open.
#include "exporter/app/http_routes.h"

#include <gtest/gtest.h>

namespace podnet::app {
namespace {

TEST(HttpRoutesTest, OnlyThePeersTargetAndTheKubeletsProbesAreOpen) {
  for (const char* open : {"/echo", "/-/healthy", "/-/ready"}) {
    const HttpRoute* r = FindHttpRoute(open);
    ASSERT_NE(r, nullptr) << open;
    EXPECT_TRUE(r->open) << open;
  }
  for (const char* closed : {"/", "/metrics", "/podnet/info", "/-/reload"}) {
    const HttpRoute* r = FindHttpRoute(closed);
    ASSERT_NE(r, nullptr) << closed;
    EXPECT_FALSE(r->open) << closed;
  }
}

TEST(HttpRoutesTest, WhatPeersAndTheKubeletTimeIsAnsweredOnTheResponderLoop) {
  for (const char* here : {"/echo", "/-/healthy", "/-/ready", "/", "/-/reload"}) {
    EXPECT_EQ(FindHttpRoute(here)->loop, HttpLoop::kResponder) << here;
  }
  for (const char* there : {"/metrics", "/podnet/info"}) {
    EXPECT_EQ(FindHttpRoute(there)->loop, HttpLoop::kControl) << there;
  }
}

TEST(HttpRoutesTest, PathsMatchExactly) {
  EXPECT_EQ(FindHttpRoute("/metrics")->id, HttpRouteId::kMetrics);
  for (const char* none : {"", "/metrics/", "/METRICS", "/echo?x", "//echo", "/-/", "/podnet"}) {
    EXPECT_EQ(FindHttpRoute(none), nullptr) << none;
  }
}

TEST(HttpRoutesTest, MethodsAndTheirAllowField) {
  const HttpRoute& reload = *FindHttpRoute("/-/reload");
  EXPECT_TRUE(HttpRouteAllows(reload, "POST"));
  EXPECT_TRUE(HttpRouteAllows(reload, "PUT"));
  EXPECT_FALSE(HttpRouteAllows(reload, "GET"));
  const HttpRoute& echo = *FindHttpRoute("/echo");
  EXPECT_TRUE(HttpRouteAllows(echo, "GET"));
  EXPECT_TRUE(HttpRouteAllows(echo, "HEAD"));
  EXPECT_TRUE(HttpRouteAllows(echo, "POST"));
  EXPECT_FALSE(HttpRouteAllows(echo, "PUT"));
  EXPECT_FALSE(HttpRouteAllows(echo, "get"));  // methods are case-sensitive (RFC 9110 §9.1)
  EXPECT_FALSE(HttpRouteAllows(*FindHttpRoute("/metrics"), "DELETE"));

  auto r = MethodNotAllowed(reload);
  EXPECT_EQ(r.status, 405);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Allow");
  EXPECT_EQ(r.headers[0].second, "POST, PUT");
  EXPECT_EQ(r.body, "Only POST, PUT requests allowed.\n");
}

}  // namespace
}  // namespace podnet::app
