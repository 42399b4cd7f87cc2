#include "exporter/config/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace podnet::config {

std::optional<std::string> ReadRegularFile(const std::string& path, std::size_t max_bytes,
                                           std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    *error = std::string("it is ") + what + " (only regular files are read)";
    return std::nullopt;
  }
  auto too_large = [&](std::uint64_t size) {
    *error = std::to_string(size) + " bytes is more than the limit of " +
             std::to_string(max_bytes) + " bytes";
    return std::nullopt;
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return too_large(st.st_size);
  // Read at most one byte past the limit: a file that grows while it is read is caught too.
  std::string text(max_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      return std::nullopt;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes) return too_large(got);
  text.resize(got);
  return text;
}

}  // namespace podnet::config
