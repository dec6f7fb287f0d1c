//===- NvidiaBinary.cpp - Host kernels as NVIDIA GPU kernels --------------===//
//
// Part of msac.
//
// First cut of the NVIDIA backend: the same generated kernel bodies as the
// host, each wrapped in a `gpu.func` whose outermost loop becomes a
// grid-stride loop over threads (iteration i runs on thread
// blockIdx.x * blockDim.x + threadIdx.x, stepping by the grid size), then
// lowered through convert-gpu-to-nvvm and serialized by
// gpu-module-to-binary (NVPTX in process, ptxas as a subprocess).
// Ops with a GPU-specific kernel (GpuKernels.cpp: the indexer, block
// top-k, split-KV attention, matrix-vector products) use it instead.
//
//===----------------------------------------------------------------------===//

#include "msac/Codegen/HostProgram.h"
#include "msac/Codegen/TargetTable.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

std::string msac::emitNvidiaBinary(ModuleOp hostKernels, ModuleOp gpuKernels,
                                   ModuleOp wgmmaKernels, ModuleOp e2m1Kernels,
                                   const std::string &targetName,
                                   const std::string &cudaToolkit,
                                   bool assembly, std::string &binary,
                                   bool fmad,
                                   std::vector<KernelGeometry> *geometry) {
  const GpuTarget *target = lookupGpuTarget(targetName);
  if (!target || target->vendor != "nvidia")
    return "'" + targetName + "' is not an NVIDIA target";
  MLIRContext *ctx = hostKernels.getContext();
  ctx->loadDialect<gpu::GPUDialect, NVVM::NVVMDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(*ctx);
  DialectRegistry registry;
  // convert-gpu-to-nvvm converts the other dialects through their
  // ConvertToLLVM interfaces, which must be registered explicitly.
  cf::registerConvertControlFlowToLLVMInterface(registry);
  arith::registerConvertArithToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);

  OpBuilder b(ctx);
  Location loc = hostKernels.getLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  module->getOperation()->setAttr("gpu.container_module", b.getUnitAttr());
  b.setInsertionPointToEnd(module->getBody());
  DictionaryAttr flags;
  if (!fmad)
    flags = b.getDictionaryAttr(
        b.getNamedAttr("ptxas-cmd-options",
                       b.getArrayAttr({b.getStringAttr("--fmad=false")})));
  auto targetAttr =
      NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda",
                                target->chip, target->features, flags);
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, "msac_kernels",
                                            b.getArrayAttr({targetAttr}));
  b.setInsertionPointToStart(gpuModule.getBody());

  // Shared-memory arrays of the GPU-specific kernels (and of their wgmma
  // bodies on targets with warpgroup MMA, or of their E2M1 bodies on
  // targets with hardware E2M1 conversions, which take precedence; no
  // kernel has both).
  const bool specific = gpuKernels && target->threadsPerBlock == kGpuThreads;
  const bool wgmma = specific && wgmmaKernels && target->wgmma;
  const bool e2m1 = specific && e2m1Kernels && target->e2m1Convert;
  // The dynamic shared-memory array is declared once per module, however
  // many kernels use it.
  auto cloneGlobals = [&](ModuleOp from) {
    for (auto global : from.getOps<LLVM::GlobalOp>())
      if (!SymbolTable::lookupSymbolIn(gpuModule, global.getSymName()))
        b.clone(*global.getOperation());
  };
  if (specific)
    cloneGlobals(gpuKernels);
  if (wgmma)
    cloneGlobals(wgmmaKernels);
  if (e2m1)
    cloneGlobals(e2m1Kernels);
  for (auto hostFn : hostKernels.getOps<func::FuncOp>()) {
    func::FuncOp fn = hostFn;
    bool gridStride = true;
    if (specific)
      if (auto own = gpuKernels.lookupSymbol<func::FuncOp>(hostFn.getName())) {
        fn = own;
        gridStride = false;
      }
    bool capRegisters = false;
    if (wgmma)
      if (auto own =
              wgmmaKernels.lookupSymbol<func::FuncOp>(hostFn.getName())) {
        fn = own;
        capRegisters = true;
      }
    if (e2m1)
      if (auto own = e2m1Kernels.lookupSymbol<func::FuncOp>(hostFn.getName())) {
        assert(!capRegisters && "a kernel with wgmma and E2M1 bodies");
        fn = own;
      }
    auto kernel =
        gpu::GPUFuncOp::create(b, loc, fn.getName(), fn.getFunctionType());
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    // A body may declare a launch shape of its own (threads, dynamic shared
    // memory, CTAs per SM to keep resident).
    auto declared = [&](StringRef attr, int64_t otherwise) {
      if (auto a = fn->getAttrOfType<IntegerAttr>(attr))
        return a.getInt();
      return otherwise;
    };
    const int64_t block = declared(kGpuBlockAttr, target->threadsPerBlock);
    const int64_t dynamicShared = declared(kGpuDynamicSharedAttr, 0);
    const int64_t ctasPerSM = declared(kGpuCtasPerSMAttr, kGpuCtasPerSM);
    if (geometry) {
      KernelGeometry g{
          fn.getName().str(),
          declared(kGpuGridAttr, target->multiprocessors * ctasPerSM), block,
          dynamicShared, fn->hasAttr(kGpuProgrammaticAttr)};
      g.cluster = declared(kGpuClusterAttr, 1);
      g.minTokens = declared(kGpuMinTokensAttr, 1);
      g.maxTokens = declared(kGpuMaxTokensAttr, 0);
      geometry->push_back(g);
    }
    // A wgmma body holds its fallback too, and ptxas sizes the registers for
    // the larger of the two: keep every CTA of the grid (kGpuCtasPerSM per
    // SM, or as many as the body declares) resident (at most 128 registers
    // for 128 threads).
    if (capRegisters || fn->hasAttr(kGpuBlockAttr)) {
      kernel->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                      b.getDenseI32ArrayAttr({int32_t(block), 1, 1}));
      kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                      b.getI32IntegerAttr(int32_t(ctasPerSM)));
    }
    Block &dst = kernel.getBody().front();
    IRMapping map;
    Block &src = fn.getBody().front();
    for (auto [from, to] : llvm::zip(src.getArguments(), dst.getArguments()))
      map.map(from, to);
    OpBuilder inner = OpBuilder::atBlockEnd(&dst);
    for (Operation &op : src) {
      if (isa<func::ReturnOp>(op)) {
        gpu::ReturnOp::create(inner, op.getLoc());
        continue;
      }
      inner.clone(op, map);
    }
    // The first top-level loop becomes a grid-stride loop over threads.
    for (Operation &op : dst) {
      if (!gridStride)
        break;
      auto loop = dyn_cast<scf::ForOp>(op);
      if (!loop)
        continue;
      OpBuilder at(loop);
      Value bid = gpu::BlockIdOp::create(at, loc, gpu::Dimension::x);
      Value bdim = gpu::BlockDimOp::create(at, loc, gpu::Dimension::x);
      Value tid = gpu::ThreadIdOp::create(at, loc, gpu::Dimension::x);
      Value gdim = gpu::GridDimOp::create(at, loc, gpu::Dimension::x);
      Value thread = arith::AddIOp::create(
          at, loc, arith::MulIOp::create(at, loc, bid, bdim), tid);
      Value threads = arith::MulIOp::create(at, loc, gdim, bdim);
      Value lb = arith::AddIOp::create(
          at, loc, loop.getLowerBound(),
          arith::MulIOp::create(at, loc, thread, loop.getStep()));
      Value step = arith::MulIOp::create(at, loc, threads, loop.getStep());
      loop.getLowerBoundMutable().assign(lb);
      loop.getStepMutable().assign(step);
      break;
    }
  }

  auto run = [&](auto &&populate, const char *what) -> bool {
    PassManager pm(ctx);
    populate(pm);
    if (succeeded(pm.run(*module)))
      return true;
    llvm::errs() << "msac: the " << what << " step failed\n";
    return false;
  };
  GpuModuleToBinaryPassOptions options;
  options.toolkitPath = cudaToolkit;
  options.compilationTarget = assembly ? "isa" : "bin";
  if (!run([](PassManager &pm) { pm.addPass(createSCFToControlFlowPass()); },
           "scf-to-cf") ||
      !run(
          [](PassManager &pm) {
            pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
          },
          "gpu-to-nvvm") ||
      // NVVM ops without an LLVM intrinsic (wgmma.mma_async) become inline
      // PTX.
      !run(
          [](PassManager &pm) {
            pm.addNestedPass<gpu::GPUModuleOp>(createConvertNVVMToLLVMPass());
          },
          "nvvm-to-llvm") ||
      !run(
          [](PassManager &pm) {
            pm.addPass(createReconcileUnrealizedCastsPass());
          },
          "reconcile-casts") ||
      !run(
          [&](PassManager &pm) {
            pm.addPass(createGpuModuleToBinaryPass(options));
          },
          "serialization"))
    return "NVIDIA code generation for " + targetName + " failed";
  for (auto bin : module->getOps<gpu::BinaryOp>())
    for (Attribute a : bin.getObjectsAttr()) {
      binary = cast<gpu::ObjectAttr>(a).getObject().str();
      return "";
    }
  return "gpu-module-to-binary produced no object";
}
