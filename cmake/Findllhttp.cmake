# Findllhttp.cmake -- llhttp from Debian's node-llhttp package.
#
# Debian ships llhttp 8.x as C sources (/usr/share/llhttp/{api,http,llhttp}.c) and a header
# (/usr/share/include/llhttp/llhttp.h), not as a library. This module compiles those sources
# into a static library and exposes it as the imported-looking target llhttp::llhttp.
#
# Result variables: llhttp_FOUND, llhttp_INCLUDE_DIR, llhttp_VERSION.
# Hints: LLHTTP_ROOT (a prefix holding share/llhttp and share/include/llhttp).

find_path(llhttp_INCLUDE_DIR llhttp.h
  HINTS ${LLHTTP_ROOT}/share/include/llhttp ${LLHTTP_ROOT}/include
  PATHS /usr/share/include/llhttp /usr/include/llhttp /usr/include /usr/local/include)
find_path(llhttp_SOURCE_DIR llhttp.c
  HINTS ${LLHTTP_ROOT}/share/llhttp
  PATHS /usr/share/llhttp /usr/local/share/llhttp)

if(llhttp_INCLUDE_DIR AND EXISTS "${llhttp_INCLUDE_DIR}/llhttp.h")
  file(STRINGS "${llhttp_INCLUDE_DIR}/llhttp.h" _llhttp_ver REGEX "#define LLHTTP_VERSION_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define LLHTTP_VERSION_${_part} ([0-9]+).*" "\\1" _v_${_part} "${_llhttp_ver}")
  endforeach()
  set(llhttp_VERSION "${_v_MAJOR}.${_v_MINOR}.${_v_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(llhttp
  REQUIRED_VARS llhttp_INCLUDE_DIR llhttp_SOURCE_DIR
  VERSION_VAR llhttp_VERSION)

if(llhttp_FOUND AND NOT TARGET llhttp::llhttp)
  add_library(cm_llhttp STATIC
    ${llhttp_SOURCE_DIR}/api.c ${llhttp_SOURCE_DIR}/http.c ${llhttp_SOURCE_DIR}/llhttp.c)
  target_include_directories(cm_llhttp SYSTEM PUBLIC ${llhttp_INCLUDE_DIR})
  set_target_properties(cm_llhttp PROPERTIES C_STANDARD 99 POSITION_INDEPENDENT_CODE ON)
  # The generated sources are third-party code: do not hold them to our warning flags.
  target_compile_options(cm_llhttp PRIVATE -w)
  # Strict mode: every line ends with CRLF, and the CRLF after chunk data is checked. Without it,
  # llhttp 8.1.0 takes a bare CR as the end of a header line or of a chunk (CVE-2023-30589):
  # a request hidden that way is split differently by a front end that reads the bytes right,
  # which is request smuggling. llhttp 9 (and Node.js since 2023) refuses both by default.
  target_compile_definitions(cm_llhttp PRIVATE LLHTTP_STRICT_MODE=1)
  add_library(llhttp::llhttp ALIAS cm_llhttp)
endif()
mark_as_advanced(llhttp_INCLUDE_DIR llhttp_SOURCE_DIR)
