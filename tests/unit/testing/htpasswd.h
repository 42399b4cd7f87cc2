#pragma once

// A basic-auth user for the tests of web/ (web_config_test, auth_gate_test): the password
// "correct horse" hashed by Apache's htpasswd (its own bcrypt, not libxcrypt):
// `htpasswd -nbBC 10 alice 'correct horse'`.

namespace podnet::testing {

inline constexpr char kAliceBcrypt[] =
    "$2y$10$yvLRgfwHg35RmbzkbRjNJ.AHEv4ag.i6QwjkFMuX4mAlKidQ/ko4S";

}  // namespace podnet::testing
