// RUN: not accrue-opt %s -train-microbatch=normalization=median 2>&1 | FileCheck %s --check-prefix=NORM
// NORM: train-microbatch: normalization must be 'exact' or 'per-micro-batch', not 'median'
// RUN: not accrue-opt %s -train-microbatch=steps=-1 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: train-microbatch: steps must be >= 1 (or 0 for a run-time count), got -1
module {}
// RUN: not accrue-opt %s -train-microbatch=collectives=ring 2>&1 | FileCheck %s --check-prefix=COLL
// COLL: train-microbatch: collectives must be 'none' or 'per-micro-batch', not 'ring'
