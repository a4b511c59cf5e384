//===- Passes.td - CPU code generation passes ---------------*- tablegen -*-===//
//
// Passes that shape bufferized linalg for LLVM on the CPU: fusion before
// bufferization, register-blocked contraction kernels, inline math, one
// function per loop nest. The CUDA backend has its own sibling folder.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CPU_PASSES_TD
#define ACCRUE_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandStridedCopies : Pass<"expand-strided-copies"> {
  let summary = "Turn memref.copy between strided buffers into loops";
  let description = [{
    A memref.copy between buffers with non-identity layouts lowers to a call
    of `memrefCopy` from MLIR's runner utilities, which compiled artifacts do
    not link. This rewrites such copies into linalg.copy, which lowers to
    plain loops; contiguous copies stay memref.copy (a memcpy).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def OutlineKernels : Pass<"outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Give every linalg op on buffers its own function";
  let description = [{
    Each linalg op with buffer semantics becomes a call of a private,
    noinline function `<caller>_k<N>` that holds only that op; constants it
    uses are cloned in, every other value it uses becomes an argument. LLVM
    then optimizes one loop nest per function: loop rotation and induction
    variable simplification cost grows much faster than linearly with the
    number of loops in one function (a 6-layer GPT step: 23 s of LLVM -O3 in
    one function, see bench/compile_gpt.py). Kernels also show up by name in
    profiles.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def VectorizeContractions
    : Pass<"vectorize-contractions", "::mlir::func::FuncOp"> {
  let summary = "Register-tile and vectorize contractions on buffers";
  let description = [{
    Each f32 contraction on static buffers (`linalg.generic` or a named
    matmul; C[.., m, n] += A[.., m, k] * B[.., k, n] with C and B contiguous
    along n, A in either layout) is tiled into `tile-m` x `tile-n` blocks of
    C with the k loop innermost, and each block becomes a `vector.contract`
    lowered to outer products: per k, one row of B is loaded once and
    `tile-m` broadcast FMAs update the block, which stays in registers for
    a block of `tile-k` steps of k (k blocks are the outer loop, so one
    block's rows of B stay in cache for every block of C). Smaller tiles are
    used when the extents do not divide; contractions of another layout
    (B contiguous along k) keep their scalar loops.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", "8", "Rows of C per register block">,
    Option<"tileN", "tile-n", "int64_t", "32",
           "Columns of C per register block">,
    Option<"dotWidth", "dot-width", "int64_t", "16",
           "Consecutive k per vector in the dot-product kernel">,
    Option<"tileK", "tile-k", "int64_t", "256",
           "Reduction steps per cache block (the outermost loop after batch "
           "dimensions)">,
  ];
  let statistics = [
    Statistic<"numVectorized", "vectorized", "Contractions vectorized">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def FuseElementwise : Pass<"fuse-elementwise"> {
  let summary = "Fuse elementwise producers into consumers without recomputing";
  let description = [{
    Upstream's `linalg-fuse-elementwise-ops` (elementwise fusion, folding
    of reshapes by expansion, linalg canonicalizations and constant
    folding), with one more condition on fusing a producer into a
    consumer: the consumer must read the producer's result through a
    permutation of all of its loops. A producer read through a map that
    leaves out consumer loops (an activation's gradient read by the
    contraction that computes a weight gradient) would be recomputed for
    every value of those loops, and the consumer would no longer be a plain
    contraction that `vectorize-contractions` handles.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

def ApproximateMath : Pass<"approximate-math"> {
  let summary = "Inline polynomial approximations of f32 math functions";
  let description = [{
    Replaces the `math` ops named by `ops` (`math.exp`, ...) with
    MLIR's polynomial approximations: straight-line arithmetic that LLVM
    vectorizes with the loop around it, where a call to libm's scalar
    function (and its slow path for special inputs, such as exp(-inf) on
    every masked attention score) blocks vectorization.
  }];
  let options = [
    ListOption<"ops", "ops", "std::string",
               "Mnemonics of the math ops to approximate">,
  ];
  let dependentDialects = ["::mlir::math::MathDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // ACCRUE_CODEGEN_CPU_PASSES_TD
