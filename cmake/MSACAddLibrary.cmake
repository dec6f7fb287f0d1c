#===- MSACAddLibrary.cmake - Helpers for msac compiler libraries ----------===#
#
# msac_add_mlir_library(name SOURCES...
#   [DEPENDS tablegen-targets...] [LINK_LIBS msac-libs...]
#   [MLIR_LIBS upstream-mlir-libs...])
#
# Builds a static library of compiler code. Upstream MLIR libraries named in
# MLIR_LIBS are linked through libMLIR.so (MLIR_LINK_MLIR_DYLIB), never as
# static archives, so a tool never holds two copies of MLIR.
#
#===----------------------------------------------------------------------===#

function(msac_add_mlir_library name)
  cmake_parse_arguments(ARG "" "" "DEPENDS;LINK_LIBS;MLIR_LIBS" ${ARGN})
  add_mlir_library(${name} ${ARG_UNPARSED_ARGUMENTS}
    EXCLUDE_FROM_LIBMLIR DISABLE_INSTALL
    DEPENDS ${ARG_DEPENDS}
    LINK_LIBS PUBLIC ${ARG_LINK_LIBS})
  mlir_target_link_libraries(${name} PUBLIC ${ARG_MLIR_LIBS})
endfunction()
