//===- msac-opt.cpp - msac's mlir-opt ---------------------------------------===//
//
// Part of msac. Parses, verifies and transforms IR of the msa and bsq
// dialects (plus the upstream dialects the models use), runs msac passes and
// pipelines, and prints the result. The lit tests drive it.
//
//===----------------------------------------------------------------------===//

#include "msac/Codegen/Artifact.h"
#include "msac/Dialect/BSQ/IR/BSQDialect.h"
#include "msac/Dialect/MSA/IR/MSADialect.h"
#include "msac/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  // Upstream passes our pipelines and tests use.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();

  msac::registerMSACPasses();
  msac::registerPipelines();

  // Only the dialects msac IR is written in.
  mlir::DialectRegistry registry;
  registry.insert<msac::msa::MSADialect, msac::bsq::BSQDialect,
                  mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect>();

  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "msac " << MSAC_VERSION << "\n"
       << "  artifact format version: " << msac::kArtifactFormatVersion << "\n";
  });
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "msac optimizer driver\n", registry));
}
