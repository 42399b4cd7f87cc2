// Content negotiation of the HTTP responder (http_server.h: AcceptsGzip, AcceptsProtobuf).
#include "exporter/responders/http_server_impl.h"

namespace podnet::responders {

namespace {

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The part of `list` before the first `separator` (all of it when there is none), as it is;
// `list` keeps what follows the separator. Each call shortens `list`, so a loop over it ends.
std::string_view PopItem(std::string_view& list, char separator) {
  std::size_t at = list.find(separator);
  std::string_view item = list.substr(0, at);
  list = at == std::string_view::npos ? std::string_view{} : list.substr(at + 1);
  return item;
}

// A qvalue (RFC 9110 §12.4.2) in thousandths: ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] );
// -1 when malformed.
int QValue(std::string_view q) {
  if (q.empty() || (q[0] != '0' && q[0] != '1')) return -1;
  int whole = q[0] - '0';
  if (q.size() == 1) return whole * 1000;
  if (q[1] != '.' || q.size() > 5) return -1;
  int frac = 0;
  int scale = 100;
  for (char c : q.substr(2)) {
    if (c < '0' || c > '9') return -1;
    frac += (c - '0') * scale;
    scale /= 10;
  }
  if (whole == 1 && frac != 0) return -1;
  return whole * 1000 + frac;
}

}  // namespace

bool AcceptsGzip(std::string_view value) {
  while (!value.empty()) {  // bounded: each round removes one element
    std::string_view element = PopItem(value, ',');
    std::size_t semi = element.find(';');
    std::string_view coding = TrimOws(element.substr(0, semi));
    if (!IEquals(coding, "gzip") && !IEquals(coding, "x-gzip")) continue;
    if (semi == std::string_view::npos) return true;
    std::string_view param = TrimOws(element.substr(semi + 1));
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') return true;
    std::string_view q = param.substr(2);
    q = TrimOws(q.substr(0, q.find(';')));
    // qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ): any non-zero digit accepts.
    return q.find_first_of("123456789") != std::string_view::npos;
  }
  return false;
}

bool AcceptsProtobuf(std::string_view value) {
  int protobuf_q = 0;  // thousandths; 0: not asked for
  int text_q = 0;
  while (!value.empty()) {  // bounded: each round removes one element
    std::string_view params = PopItem(value, ',');
    std::string_view type = TrimOws(PopItem(params, ';'));
    int q = 1000;
    bool proto = false;
    bool delimited = false;
    while (!params.empty()) {  // bounded: each round removes one parameter
      std::string_view param = TrimOws(PopItem(params, ';'));
      std::size_t eq = param.find('=');
      if (eq == std::string_view::npos) continue;
      std::string_view name = TrimOws(param.substr(0, eq));
      std::string_view v = TrimOws(param.substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      if (IEquals(name, "q")) {
        q = QValue(v);
      } else if (IEquals(name, "proto")) {
        proto = v == "io.prometheus.client.MetricFamily";
      } else if (IEquals(name, "encoding")) {
        delimited = IEquals(v, "delimited");
      }
    }
    if (q < 0) continue;  // a malformed q-value: the element is left out
    if (IEquals(type, "application/vnd.google.protobuf")) {
      if (proto && delimited) protobuf_q = std::max(protobuf_q, q);
    } else if (IEquals(type, "text/plain") || IEquals(type, "text/*") || IEquals(type, "*/*")) {
      text_q = std::max(text_q, q);
    }
  }
  return protobuf_q > 0 && protobuf_q >= text_q;
}

}  // namespace podnet::responders
