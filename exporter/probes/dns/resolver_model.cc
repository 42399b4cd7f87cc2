#include "exporter/probes/dns/resolver_model.h"

#include <algorithm>

namespace podnet::probes::dns {

const char* QTypeName(QType t) { return t == QType::kA ? "A" : "AAAA"; }

std::string RcodeName(int rcode) {
  switch (rcode) {
    case kNoError:
      return "NOERROR";
    case kFormErr:
      return "FORMERR";
    case kServFail:
      return "SERVFAIL";
    case kNxDomain:
      return "NXDOMAIN";
    case kNotImp:
      return "NOTIMP";
    case kRefused:
      return "REFUSED";
    default:
      return "RCODE" + std::to_string(rcode);
  }
}

const char* ResultName(Result r) {
  switch (r) {
    case Result::kSuccess:
      return "success";
    case Result::kNxDomain:
      return "nxdomain";
    case Result::kNoData:
      return "nodata";
    case Result::kServFail:
      return "servfail";
    case Result::kTimeout:
      return "timeout";
    case Result::kError:
      return "error";
  }
  return "error";
}

bool Encodable(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t dot = name.find('.', start);
    std::size_t len = (dot == std::string_view::npos ? name.size() : dot) - start;
    if (len == 0 || len > 63) return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

std::optional<std::string> MuslQuery(std::string_view name, QType qtype) {
  name = name.substr(0, std::min<std::size_t>(name.size(), 255));  // strnlen(dname, 255)
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.size() > 253) return std::nullopt;
  // A second trailing dot is not a label: it is never checked, and stays in the message.
  bool dot_left = !name.empty() && name.back() == '.';
  std::string_view labels = dot_left ? name.substr(0, name.size() - 1) : name;
  std::string msg(12, '\0');
  msg[2] = 0x01;  // RD (opcode QUERY); lookup_name.c clears the AD byte
  msg[5] = 0x01;  // QDCOUNT 1
  // Every label 1..63 bytes (an empty one, e.g. of "a..b" or ".a", is refused); the root
  // ("" after the one trailing dot) has none.
  for (std::size_t start = 0; !labels.empty() || dot_left;) {
    std::size_t dot = labels.find('.', start);
    std::size_t end = dot == std::string_view::npos ? labels.size() : dot;
    if (end == start || end - start > 63) return std::nullopt;
    msg += static_cast<char>(end - start);
    msg.append(labels.substr(start, end - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  auto type = static_cast<char>(static_cast<std::uint16_t>(qtype));
  msg += dot_left ? '.' : '\0';  // the name's end: its terminating zero, or the stray dot
  msg += std::string{'\0', type, '\0', '\x01'};
  if (dot_left) msg += '\0';
  return msg;
}

std::unique_ptr<ResolverModel> MakeModel(Libc libc, const ResolvConf& conf, std::string name) {
  if (libc == Libc::kGlibc) return MakeGlibcModel(conf, std::move(name));
  return MakeMuslModel(conf, std::move(name));
}

}  // namespace podnet::probes::dns
