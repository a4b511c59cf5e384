//===- Passes.td - CPU code generation passes ---------------*- tablegen -*-===//
//
// Passes that shape bufferized linalg for LLVM on the CPU: register-blocked
// contraction kernels, inline math, one function per loop nest. The CUDA
// backend has its own sibling folder; what both use is in Common.
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

def FreeAtLastUse : Pass<"free-at-last-use", "::mlir::func::FuncOp"> {
  let summary = "Move each dealloc to just after its buffer's last use, "
                "and its alloc to just before the first";
  let description = [{
    Ownership-based buffer deallocation frees a buffer at the end of the
    block that owns it: in the micro-batch loop, the end of the micro-step,
    so every temporary of the forward and the backward stays allocated until
    then. This pass moves a `memref.dealloc` of a buffer allocated in the
    same block to just after the last op of that block that uses the buffer
    or a view of it (an op with a nested region counts where it is in the
    block). A buffer that may escape through a terminator (a view yielded
    by a loop or branch) keeps its dealloc where it is.

    Likewise the `memref.alloc` of such a buffer moves down to just before
    the first op of its block that uses it: bufferization allocates where
    the tensor was made, which can be long before it is written (the shared
    zero fill a contraction starts from, placed where CSE left it). Only
    where buffers live changes, not what any op computes.
  }];
  let statistics = [
    Statistic<"numMoved", "moved", "Deallocs moved to a last use">,
    Statistic<"numSunk", "sunk", "Allocs moved to a first use">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def TileTransposes : Pass<"tile-transposes", "::mlir::func::FuncOp"> {
  let summary = "Copy transposes on buffers in cache-sized blocks";
  let description = [{
    A `linalg.transpose` on static buffers that moves the innermost
    dimension becomes an `scf.parallel` loop over blocks of `tile` x `tile`
    elements (the output's innermost dimension by the one the input's
    innermost becomes; other dimensions one at a time), each a transpose of
    subviews. As plain loops it touches a new cache line for every element
    read or written; in blocks, the rows of a block stay in L1. With
    `parallel`, the block loop of a transpose of at least
    `min-parallel-elements` is marked `accrue.parallel_kernel`, which
    `schedule-parallel-loops` keeps (the blocks' own sizes are not static,
    so it could not count their work).
  }];
  let options = [
    Option<"tile", "tile", "int64_t", "16",
           "Elements per side of a block (16 f32: one 64-byte line)">,
    Option<"parallel", "parallel", "bool", "false",
           "Mark the block loops of large transposes to run on all cores">,
    Option<"minParallelElements", "min-parallel-elements", "int64_t", "32768",
           "Elements below which a transpose's blocks stay sequential">,
  ];
  let statistics = [
    Statistic<"numTiled", "tiled", "Transposes tiled">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def VectorizeContractions
    : Pass<"vectorize-contractions", "::mlir::func::FuncOp"> {
  let summary = "Register-tile and vectorize contractions on buffers";
  let description = [{
    Each f32 contraction on static buffers (`linalg.generic` or a named
    matmul; C[.., m, n] += A[.., m, k] * B[.., k, n], extra m, n and k
    dimensions allowed) is tiled into blocks of C held in registers over a
    block of `tile-k` steps of k: outer products (`tile-m` x `tile-n`) when
    B and C are contiguous along n (per k, one row of B and a broadcast FMA
    per row of the block), dot products when A and B are contiguous along
    k (over all of k, so that each element's vector of partial sums is
    reduced once: a whole block's vectors, as many as they have lanes,
    together, by shuffles that pair them and add the low half of each group
    of lanes to its high half, 15 vector adds for 4 x 4 of 16 lanes, C
    updated a row of the block at a time where it is contiguous along n; a
    remainder block's each alone, reassociated; either way the lanes sum as
    a tree of halves). k blocks are the outer loop after the batch dimensions,
    so one block's rows of B stay in cache for every block of C; an outer
    product's blocks of n run outside its blocks of m (each block of n
    streams A's panel, the block of k by all rows) unless A's panel
    outgrows half of `l2-bytes` and B's fits there; extra k
    dimensions run inside the block's accumulation, except where a dot
    product block's rows of A and B over all of k would outgrow half of a
    32 KiB L1 (a convolution's weight gradient, summed over samples and
    pixels): the first extra k dimension then runs in blocks around the
    blocks of C (of as many iterations as fit there), and each block of C
    keeps its vector partial sums in a buffer between them. Remainders of m (and of
    n for dot products) get smaller blocks; other layouts keep their scalar
    loops. With `pack-b`, outer products over at least 64 rows (and no
    extra k dimensions) first copy each block of k's rows of B into one
    buffer, in blocks of `tile-n` columns, so a block of C reads them from
    consecutive addresses; with `pack-a`, the same outer products whose A
    is contiguous along m (a transposed operand, as in a weight gradient
    X^T dY, where the rows of a block of C are consecutive elements of each
    of k's rows of A, rows that lie far apart) copy A's columns of each
    block of k, in blocks of `tile-m`. A kernel allocates its buffers once
    and each block of k refills them, in parallel over k when its blocks
    of C are parallel. With `fuse-m-tail`, the rows after an outer
    product's last whole block of m (32 rows: 5 blocks of 6, then 2) are
    one smaller block in each block of n, after its blocks of m, reading
    the rows of B those just read, instead of a kernel of their own that
    streams all of B again, where the blocks of m run inside the blocks of
    n (and, when parallel, n has at least 16 blocks). The sums keep their
    order. An unpacked outer product's block of C reads its rows of B a row
    of B apart, one stream per step of k, more than the hardware
    prefetchers follow: each step of k prefetches (`memref.prefetch`) every
    cache line of its row of B in the next block of n, so that block finds
    them in cache (bench/README.md has the steps it made faster). The
    results do not change.

    With `bf16-dot`, a contraction of two bf16 inputs into f32 (its body
    widens them) gets the same kernels on AVX512-BF16's `vdpbf16ps`
    (`x86vector.avx512.dot`), which adds the products of a pair of bf16 to
    each f32 lane: the outer products take k in pairs (the two rows of B
    interleaved, A's pair broadcast), the dot products twice the k per
    vector. Where at least 64 rows of A read them, each
    block of k first packs B's pairs (and A's, unless A is contiguous along
    k), in blocks of the kernel's tile, into a buffer the blocks of C then
    stream. k (each block of k) must be even.

    With `parallel`, contractions of at least `min-parallel-flops`
    multiply-adds get one `scf.parallel` loop: over the batch dimensions
    when they have at least 4 iterations, else over the blocks of C inside
    each k block. Each element of C is still summed by one thread in a
    fixed order, so results do not depend on the number of threads.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", "8", "Rows of C per register block">,
    Option<"tileN", "tile-n", "int64_t", "32",
           "Columns of C per register block">,
    Option<"dotWidth", "dot-width", "int64_t", "16",
           "Consecutive k per vector in the dot-product kernel">,
    Option<"dotTileM", "dot-tile-m", "int64_t", "4",
           "Rows of C per block of the dot-product kernel">,
    Option<"dotTileN", "dot-tile-n", "int64_t", "4",
           "Columns of C per block of the dot-product kernel">,
    Option<"packA", "pack-a", "bool", "false",
           "Outer products over 64 or more rows whose A is contiguous along m "
           "copy each block of k's columns of A into one contiguous buffer "
           "first">,
    Option<"packB", "pack-b", "bool", "false",
           "Outer products over 64 or more rows copy each block of k's rows "
           "of B into one contiguous buffer first">,
    Option<"fuseMTail", "fuse-m-tail", "bool", "false",
           "An outer product's rows after its last whole block of m are one "
           "more block in each block of n instead of a second pass over B">,
    Option<"l2Bytes", "l2-bytes", "int64_t", "2097152",
           "The target CPU's L2 cache per core in bytes: the blocks of m "
           "run outside the blocks of n where only B's panel fits half of "
           "it">,
    Option<"tileK", "tile-k", "int64_t", "256",
           "Reduction steps per cache block (the outermost loop after batch "
           "dimensions)">,
    Option<"parallel", "parallel", "bool", "false",
           "Run the blocks of large contractions as scf.parallel loops">,
    Option<"minParallelFlops", "min-parallel-flops", "int64_t", "131072",
           "Multiply-adds below which a contraction stays sequential">,
    Option<"bf16Dot", "bf16-dot", "bool", "false",
           "Contractions of two bf16 inputs into f32 on AVX512-BF16's "
           "vdpbf16ps (x86vector.avx512.dot)">,
  ];
  let statistics = [
    Statistic<"numVectorized", "vectorized", "Contractions vectorized">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::x86vector::X86VectorDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def DuplicateSharedFills : Pass<"duplicate-shared-fills"> {
  let summary = "Give every destination-passing use of a tensor fill its own fill";
  let description = [{
    CSE merges identical fills (the zeros contractions and sums start
    from); one-shot bufferization then copies the shared buffer for each op
    that writes into it. A fill per destination, right before it,
    bufferizes in place instead; the shared fill stays only for ops that
    read it. Right before: `accumulate-in-place` then finds every weight
    gradient's fill next to its reduction, whatever was moved or recomputed
    elsewhere in the step (with the first destination left on the shared
    fill, where CSE put it, a gradient's rounding depended on that place).
    A `tensor.empty` that several destinations share (CSE merges those
    too: the results of a multi-result op start from one) gets one per
    destination after the first, right before it: bufferized, the results
    get buffers of their own, where one of them took the shared buffer and
    a later op, once its value had been copied out, reused it.
  }];
  let statistics = [
    Statistic<"numDuplicated", "duplicated",
              "Fills and empty tensors duplicated">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def ForwardCopiedResults : Pass<"forward-copied-results",
                                 "::mlir::func::FuncOp"> {
  let summary = "Compute a result in the buffer it is copied into";
  let description = [{
    One-shot bufferization computes a tensor inserted into a slice of a
    larger one in that slice only where eliminate-empty-tensors could make
    the slice its destination. Where one op computes several results
    inserted into slices one after another (an LSTM cell's backward, fused,
    yields the four gate gradients each time step concatenates into its
    slice of their stack), the later slices come after the op in SSA
    order: those results are computed into temporaries and copied, four
    copies per time step. After bufferization the order no longer binds: a
    `memref.copy` whose source is a view of a `memref.alloc` that only one
    linalg op writes (an init its body does not read) and nothing else
    uses goes, and the op writes the copy's destination instead (its view
    ops moved before the op), when nothing between the op and the copy has
    memory effects and no other operand of the op may alias the
    destination (local alias analysis).
  }];
  let statistics = [
    Statistic<"numForwarded", "forwarded", "Copies of results forwarded">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def AccumulateInPlace : Pass<"accumulate-in-place", "::mlir::func::FuncOp"> {
  let summary = "Let gradient reductions accumulate straight into the arena";
  let description = [{
    After bufferization, a weight gradient is a reduction (a contraction or
    a sum) into a zero-filled temporary, which train.accumulate then adds
    to the gradient accumulator's slice. When nothing between the reduction
    and the add writes the accumulator, the reduction accumulates into the
    slice instead (beta = 1) and the temporary, its zero fill and the add
    are removed. Likewise an elementwise op that writes every element of
    the temporary without reading it (a bf16 weight gradient rounded to
    bf16, as autocast's is): it yields `out + f(in)` into the slice.

    With `fold-zero-fills` (for vectorize-contractions, which honors it), a
    contraction that accumulates into a buffer zero-filled just before is
    marked `accrue.zero_init` and the fill removed: its first k block
    starts from zeros instead of loading C (beta = 0), which saves a pass
    over C.
  }];
  let options = [
    Option<"foldZeroFills", "fold-zero-fills", "bool", "false",
           "Fold zero fills into the contractions that follow them">,
  ];
  let statistics = [
    Statistic<"numInPlace", "in-place", "Gradients accumulated in place">,
    Statistic<"numFolded", "folded-fills", "Zero fills folded into contractions">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def ScheduleParallelLoops
    : Pass<"schedule-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "Keep the scf.parallel loops worth a thread fork, serialize the rest";
  let description = [{
    After linalg ops become loops (`convert-linalg-to-parallel-loops`) every
    run of parallel dimensions is an `scf.parallel`. Forking threads pays
    only for an outermost loop with enough work, so this pass keeps an
    `scf.parallel` when it is nested in no other loop and its work reaches
    `min-work`: its iterations, times those of the loops inside it, times
    1 plus `transcendental-work` for each transcendental function in its
    body (exp, log, tanh, erf, ...: polynomials or libm calls, where an
    elementwise add is one instruction; an LSTM cell's gates over 16 x 256
    points are worth two threads, a copy of as many is not) (or when
    `vectorize-contractions` made it, marked `accrue.parallel_kernel`, and
    no other parallel loop encloses it); the others become nested
    `scf.for` loops. What remains is lowered to OpenMP. A parallel loop
    never carries a reduction across its iterations, so each value is
    computed by one thread in a fixed order: results are bitwise identical
    for any number of threads.

    The innermost `scf.for` made from a parallel loop (at least 16
    iterations, scalar code, each load and store at consecutive elements
    along it in a buffer contiguous there, or loads of elements it does not
    move) is annotated as having independent iterations
    (`llvm.loop_annotation` with an access group in `parallelAccesses`,
    which `attach-loop-annotations` gives its loads and stores): LLVM then
    vectorizes it without checking at run time that its buffers do not
    overlap. Those checks, hoisted out of the loops around it, compare
    whole row ranges, and the slices of one buffer an op writes row by row
    (an LSTM cell's four gate gradients, side by side in each row of their
    stack) always overlap there: every row took the scalar loop.
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t", "32768",
           "Work (iterations, weighted) below which a parallel loop stays "
           "sequential">,
    Option<"transcendentalWork", "transcendental-work", "int64_t", "16",
           "The work of a transcendental function (math.exp, math.tanh, "
           "...) in a loop's body, in iterations of an elementwise add">,
  ];
  let statistics = [
    Statistic<"numParallel", "parallel", "Parallel loops kept">,
    Statistic<"numSerialized", "serialized", "Parallel loops serialized">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def CollapseShortLoops : Pass<"collapse-short-loops"> {
  let summary = "Merge a short innermost loop with the loops around it";
  let description = [{
    Folding reshapes into elementwise ops (`fuse-elementwise`) splits
    dimensions: a 2x2 pooling window's gradient is read as
    `[N, C, H/2, 2, W/2, 2]`, and the bias gradient that sums it over
    everything but C iterates the same way, innermost loop 2 long, which
    LLVM cannot vectorize. Where the innermost loop of a linalg.generic
    that is not a contraction and runs at least 2^14 iterations (smaller
    ops keep their loops, and their sums their order) is shorter than 8,
    this merges the longest
    run of consecutive loops of the same kind ending at it that every
    operand reads contiguously (`linalg::collapseOpIterationDims`): the
    bias gradient becomes a sum over `[N, C, H W]`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def UnrollShortLoops : Pass<"unroll-short-loops", "::mlir::func::FuncOp"> {
  let summary = "Unroll a short innermost loop into the loop around it, "
                "and let LLVM vectorize one of 8 to 15 iterations";
  let description = [{
    LLVM's loop vectorizer only vectorizes innermost loops. A 2x2 pooling
    window's gradient routed by the window's argmax iterates
    `[N, C, H/2, 2, W/2, 2]` and reads the argmax at `(N, C, H/2, W/2)`, so
    `collapse-short-loops` cannot merge its innermost loop (2 long) with
    the one around it: LLVM gets a 2-iteration innermost loop, keeps it
    scalar, and turns the argmax's select into an unpredictable branch.
    This pass fully unrolls an innermost `scf.for` with constant bounds
    and fewer than 8 iterations (repeatedly, while the unrolled body stays
    under `max-ops` ops) when it sits in another `scf.for`: the loop
    around it becomes innermost, and LLVM vectorizes it (the two window
    columns are an interleaved pair of loads and stores). Loops holding
    vector values (the contraction kernels) are left alone. Unrolling
    keeps every operation and its order: results are bitwise unchanged.

    An innermost loop of 8 to 15 iterations fills a vector, but LLVM's
    vectorizer takes it for tiny and vectorizes it only when it needs no
    run-time check that its buffers do not overlap, which two buffers it
    cannot tell apart do need (a convolution's input gradient adds 8 x 8
    images' rows into a padded 10 x 10 one: a scalar loop). This pass
    marks such loops `llvm.loop_annotation` with vectorization enabled,
    which lets LLVM emit the checks. A loop that sums (LLVM vectorizes
    reductions marked `reassoc`) then sums in vector lanes. Loops that
    round to bf16 or widen from it are not marked: LLVM 22 would take 4
    lanes for them (it prices the conversions one element at a time).
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", "256",
           "Ops an unrolled body may hold">,
  ];
  let statistics = [
    Statistic<"numUnrolled", "unrolled", "Short loops unrolled">,
    Statistic<"numVectorized", "vectorized",
              "Loops of 8 to 15 iterations marked for vectorization">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def AttachLoopAnnotations : Pass<"attach-loop-annotations"> {
  let summary = "Make a latch branch's llvm.loop_annotation its loop metadata";
  let description = [{
    `convert-scf-to-cf` moves an `scf.for`'s `llvm.loop_annotation` (what
    `unroll-short-loops` marks to be vectorized) to the loop's latch
    branch; `convert-cf-to-llvm` keeps it there as a discardable attribute,
    which the translation to LLVM IR ignores. This pass, after both, makes
    it the `llvm.br` or `llvm.cond_br`'s own `loop_annotation`, which the
    translation emits as the loop's `!llvm.loop` metadata.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def MergeContractionDims : Pass<"merge-contraction-dims"> {
  let summary = "Merge a contraction's adjacent loops of the same kind";
  let description = [{
    A MatMul of a `[B, T, D]` activation by a `[D, E]` weight is a
    contraction with two m dimensions, B and T; `vectorize-contractions`
    blocks only the last and runs the others as batch loops, so each of
    the B slices of T rows packs all of the weight's rows of B again (and
    its blocks of C see only T rows). Where every operand of a
    `linalg.generic` contraction on tensors reads consecutive loops
    consecutively, in order, or not at all (so they are all batch, all m,
    all n or all k dimensions: the same operands read them), this merges
    them into one (`linalg::collapseOpIterationDims`): the MatMul becomes
    one of B T rows. Each element of the result is
    still summed over the same k in the same order.
  }];
  let statistics = [
    Statistic<"numMerged", "merged", "Contractions whose loops merged">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FoldIntoContractions : Pass<"fold-into-contractions"> {
  let summary = "Fold transposes and sums into the contractions that use them";
  let description = [{
    The folds `cuda-fold-into-contractions` makes (a transposed or copied
    input read from its source, a contraction whose result is only summed
    or only transposed summing or writing it itself), each made only when
    the contraction's new layout gets a kernel of `vectorize-contractions`
    at least as good as before (outer products over dot products over
    scalar loops) for registers of `vector-bits`. PyTorch exports every
    Linear as a MatMul with a transposed weight, and its weight gradient is
    a contraction followed by a transpose: folded, the gradient contraction
    writes the gradient's layout and feeds `train.accumulate` directly, so
    `accumulate-in-place` adds it straight into the arena. The forward's
    transposed weight stays (folded, B would be contiguous along k and the
    outer products would become dot products). A transpose of a
    contraction's result rounded to bf16 (the weight gradients of a bf16
    step) moves before the rounding and folds likewise; the rounding then
    maps the gradient's layout.

    With `bf16-dot`, a contraction whose two inputs are bf16 tensors
    widened to f32 (as nn-to-linalg widens a bf16 product's operands)
    reads the bf16 tensors and widens in its body, where the new
    contraction gets the same kernel on `vdpbf16ps` as it had in f32 (k in
    pairs); data movement between a widening and the contractions it
    feeds moves bf16 values (the folds of `cuda-fold-into-contractions`).
    Without `layouts`, only these widening folds run: the pipeline runs
    them before elementwise fusion too, which would merge a widening into
    the op that produced its bf16 values.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", "512",
           "The target's vector register width (sets the kernels' tiles)">,
    Option<"bf16Dot", "bf16-dot", "bool", "false",
           "Contractions read bf16 operands (vectorize-contractions' "
           "bf16-dot kernels)">,
    Option<"layouts", "layouts", "bool", "true",
           "The layout folds (off: only the widening folds)">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
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
