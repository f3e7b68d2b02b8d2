# cm_models.cmake -- how a model folder registers itself with cm-server and the conformance suite.
#
#   cm_register_model(NAME asio_coro TARGET cm_asio_coro DESCRIPTION "Boost.Asio C++20 coroutines")
#
# declares that the library TARGET defines, in namespace cm::models,
#
#   std::unique_ptr<cm::Server> make_<NAME>(const cm::ServerOptions&);
#
# servers/ generates its registry from these calls, so adding a model touches no file in servers/.
define_property(GLOBAL PROPERTY CM_MODEL_NAMES BRIEF_DOCS "models built" FULL_DOCS "models built")
define_property(GLOBAL PROPERTY CM_MODEL_TARGETS BRIEF_DOCS "their targets" FULL_DOCS "their targets")
define_property(GLOBAL PROPERTY CM_MODEL_ENTRIES BRIEF_DOCS "registry lines" FULL_DOCS "registry lines")
define_property(GLOBAL PROPERTY CM_MODEL_LEFT_OUT BRIEF_DOCS "models not built" FULL_DOCS "and why")

function(cm_register_model)
  cmake_parse_arguments(arg "" "NAME;TARGET;DESCRIPTION" "" ${ARGN})
  if(NOT arg_NAME OR NOT arg_TARGET)
    message(FATAL_ERROR "cm_register_model needs NAME and TARGET")
  endif()
  set_property(GLOBAL APPEND PROPERTY CM_MODEL_NAMES ${arg_NAME})
  set_property(GLOBAL APPEND PROPERTY CM_MODEL_TARGETS ${arg_TARGET})
  set_property(GLOBAL APPEND_STRING PROPERTY CM_MODEL_ENTRIES
    "CM_MODEL(${arg_NAME}, \"${arg_DESCRIPTION}\")\n")
endfunction()

# cm_model_left_out(NAME uring_coro REASON "liburing not found by pkg-config")
#
# records a model that this configure leaves out, and why, so that `cm-server --model uring_coro`
# can say it was not built (rather than "unknown"), and print the reason once at configure time.
function(cm_model_left_out)
  cmake_parse_arguments(arg "" "NAME;REASON" "" ${ARGN})
  message(STATUS "${arg_NAME}: left out (${arg_REASON})")
  set_property(GLOBAL APPEND_STRING PROPERTY CM_MODEL_LEFT_OUT
    "CM_LEFT_OUT(${arg_NAME}, \"${arg_REASON}\")\n")
endfunction()
