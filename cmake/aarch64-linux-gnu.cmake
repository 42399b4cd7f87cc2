# CMake toolchain file: podnet-exporter for arm64 (aarch64-linux-gnu), cross-compiled on a
# Debian 12 amd64 machine with Debian's g++-aarch64-linux-gnu against an arm64 sysroot of
# Debian 12's -dev packages (scripts/build-arm64.sh makes it with mmdebstrap and passes it as
# PODNET_SYSROOT). Libraries, headers, CMake packages and pkg-config files come from the
# sysroot only; programs run at build time (protoc, for metrics.proto) are this machine's, the
# same Debian versions as the sysroot's libprotobuf. CMake's documentation: cmake-toolchains(7),
# "Cross Compiling for Linux".
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT PODNET_SYSROOT)
  set(PODNET_SYSROOT "$ENV{PODNET_SYSROOT}")
endif()
if(NOT IS_DIRECTORY "${PODNET_SYSROOT}/usr/include")
  message(FATAL_ERROR "aarch64-linux-gnu.cmake: no arm64 sysroot at '${PODNET_SYSROOT}' "
                      "(-DPODNET_SYSROOT=DIR; scripts/build-arm64.sh makes one)")
endif()
# try_compile() projects read this file again: they get the sysroot from the environment.
set(ENV{PODNET_SYSROOT} "${PODNET_SYSROOT}")
set(CMAKE_SYSROOT "${PODNET_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${PODNET_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # protoc: this machine's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Debian's multiarch library directory, for find_library() and the CMake packages under it.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config (c-ares): the sysroot's .pc files only, their paths prefixed with the sysroot.
set(ENV{PKG_CONFIG_LIBDIR}
    "${PODNET_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${PODNET_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${PODNET_SYSROOT}")
