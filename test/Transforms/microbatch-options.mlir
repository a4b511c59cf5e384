// RUN: not accrue-opt %s -train-microbatch=normalization=median 2>&1 | FileCheck %s --check-prefix=NORM
// NORM: for the --normalization option: Cannot find option named 'median'!
// RUN: not accrue-opt %s -train-microbatch=steps=-1 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: train-microbatch: steps must be >= 1 (or 0 for a run-time count), got -1
module {}
// RUN: not accrue-opt %s -train-microbatch=collectives=ring 2>&1 | FileCheck %s --check-prefix=COLL
// COLL: for the --collectives option: Cannot find option named 'ring'!
