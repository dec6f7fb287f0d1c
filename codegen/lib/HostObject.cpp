//===- HostObject.cpp - LLVM dialect -> x86-64 shared object --------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Codegen/HostProgram.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;

LogicalResult msac::lowerKernelsToLLVM(ModuleOp kernels) {
  PassManager pm(kernels.getContext());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(kernels);
}

std::string msac::emitHostSharedObject(ModuleOp llvmModule,
                                       const std::string &soPath,
                                       const std::string &lldPath) {
  registerBuiltinDialectTranslation(*llvmModule.getContext());
  registerLLVMDialectTranslation(*llvmModule.getContext());
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(llvmModule, llvmContext, "msac_kernels");
  if (!module)
    return "cannot translate the kernels to LLVM IR";

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  // A fixed baseline (x86-64-v2) so the artifact runs on any recent x86
  // machine, not only on the one it was compiled on.
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return "no x86-64 target in this LLVM: " + error;
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "x86-64-v2", "", options, llvm::Reloc::PIC_));
  module->setDataLayout(machine->createDataLayout());
  module->setTargetTriple(triple);

  auto optimize = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                            machine.get());
  if (llvm::Error err = optimize(module.get())) {
    std::string message;
    llvm::raw_string_ostream os(message);
    os << err;
    return "LLVM optimization failed: " + message;
  }

  std::string objPath = soPath + ".o";
  {
    std::error_code ec;
    llvm::raw_fd_ostream obj(objPath, ec, llvm::sys::fs::OF_None);
    if (ec)
      return "cannot write " + objPath + ": " + ec.message();
    llvm::legacy::PassManager pm;
    if (machine->addPassesToEmitFile(pm, obj, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return "the x86-64 backend cannot emit an object file";
    pm.run(*module);
  }
  std::string errorMessage;
  llvm::StringRef args[] = {lldPath, "-shared", "--no-undefined-version",
                            "-o", soPath, objPath, "-lm", "-L/usr/lib/x86_64-linux-gnu",
                            "-L/lib/x86_64-linux-gnu"};
  int rc = llvm::sys::ExecuteAndWait(lldPath, args, std::nullopt, {}, 0, 0,
                                     &errorMessage);
  llvm::sys::fs::remove(objPath);
  if (rc != 0)
    return "linking " + soPath + " with " + lldPath + " failed" +
           (errorMessage.empty() ? "" : ": " + errorMessage);
  // A linker that exits 0 without writing the output (a wrong --lld) would
  // leave an artifact without its kernels.
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(soPath, size) || size == 0)
    return lldPath + " exited successfully but wrote no " + soPath +
           "; point --lld at LLVM's ld.lld";
  return "";
}
