# accrue_add_library(name SOURCES... [DEPENDS targets...] [LINK_LIBS libs...])
#
# A static library of the compiler. It links the monolithic libMLIR.so and
# libLLVM.so (never the static component libraries, which would duplicate
# MLIR's global registries).
function(accrue_add_library name)
  cmake_parse_arguments(ARG "" "" "DEPENDS;LINK_LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PUBLIC MLIR LLVM ${ARG_LINK_LIBS})
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  accrue_install_library(${name})
endfunction()

# Installs library `name` into the exported package as Accrue::<name without
# its Accrue prefix> (AccrueTrainDialect: Accrue::TrainDialect), with the
# installed include folder as its interface.
function(accrue_install_library name)
  string(REGEX REPLACE "^Accrue" "" exported ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${exported})
  target_include_directories(${name} INTERFACE $<INSTALL_INTERFACE:include>)
  install(TARGETS ${name} EXPORT AccrueTargets
    ARCHIVE DESTINATION lib
    LIBRARY DESTINATION lib
    RUNTIME DESTINATION bin)
endfunction()
