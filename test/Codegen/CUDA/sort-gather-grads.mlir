// RUN: accrue-opt %s -split-input-file -cuda-sort-gather-grads -canonicalize | FileCheck %s

// An embedding's gradient (128 tokens of 3 features into 10 rows): the
// ranks of the keys row x 128 + position (a reduction over the tokens,
// the token's own id first, so that cuda-split-reductions takes it as a
// column reduction), the keys written at their ranks (one independent
// iteration per token) into 11 tiles of 12 (ceil(sqrt(128)), and one key
// of padding past the last token, 10 x 128), each tile's tail, then one
// independent iteration per (sorted token, feature) that writes its
// segment's sum into zero rows where the next key names another row: the
// earlier tiles' tails (11), then its own tile's tokens (12). Ids wrap
// and clamp as nn.gather reads them.

// CHECK-DAG: #[[$OTHER:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[$OWN:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$TOKEN:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$LAST:.+]] = affine_map<(d0, d1, d2) -> (d0, 11)>
// CHECK-LABEL: func @embedding
// CHECK-SAME: (%[[DY:.+]]: tensor<4x32x3xf32>, %[[IDS:.+]]: tensor<4x32xi64>)
// CHECK-DAG: %[[PAST:.+]] = arith.constant 1280 : i64
// CHECK-DAG: %[[N:.+]] = arith.constant 128 : i64
// CHECK: %[[FLAT:.+]] = tensor.collapse_shape %[[IDS]] {{\[\[}}0, 1]] : tensor<4x32xi64> into tensor<128xi64>
// CHECK: %[[RANK:.+]] = linalg.generic {indexing_maps = [#[[$OWN]], #[[$OTHER]], #[[$OWN]]], iterator_types = ["parallel", "reduction"]} ins(%[[FLAT]], %[[FLAT]] : tensor<128xi64>, tensor<128xi64>)
// CHECK:   arith.cmpi slt
// CHECK:   arith.muli %{{.+}}, %[[N]] : i64
// CHECK:   %[[LESS:.+]] = arith.cmpi ult
// CHECK:   %[[ONE:.+]] = arith.extui %[[LESS]] : i1 to i64
// CHECK:   arith.addi %{{.+}}, %[[ONE]] : i64
// CHECK: %[[KEYS0:.+]] = linalg.fill ins(%[[PAST]] : i64) outs(%{{.+}} : tensor<132xi64>)
// CHECK: %[[SORTED:.+]] = scf.for %[[T:.+]] = %c0 to %c128 step %c1 iter_args(%[[K:.+]] = %[[KEYS0]])
// CHECK:   %[[AT:.+]] = tensor.extract %[[RANK]][%[[T]]]
// CHECK:   %[[ATI:.+]] = arith.index_cast %[[AT]] : i64 to index
// CHECK:   tensor.insert %{{.+}} into %[[K]][%[[ATI]]] : tensor<132xi64>
// CHECK: } {nn.independent_iterations}
// CHECK: %[[TILED:.+]] = tensor.expand_shape %[[SORTED]] {{\[\[}}0, 1]] output_shape [11, 12]
// CHECK: %[[TAILS:.+]] = linalg.generic {indexing_maps = [#[[$TOKEN]], #[[$LAST]], #{{.+}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[TILED]], %[[TILED]] : tensor<11x12xi64>, tensor<11x12xi64>) outs(%{{.+}} : tensor<11x3xf32>)
// CHECK:   arith.cmpi eq
// CHECK:   tensor.extract %{{.+}} : tensor<128x3xf32>
// CHECK:   arith.select
// CHECK:   arith.addf
// CHECK: scf.for %[[I:.+]] = %c0 to %c384 step %c1 iter_args(%[[G:.+]] = %{{.+}}) -> (tensor<10x3xf32>)
// CHECK:   %[[S:.+]] = arith.divui %[[I]], %c3 : index
// CHECK:   %[[F:.+]] = arith.remui %[[I]], %c3 : index
// CHECK:   %[[KEY:.+]] = tensor.extract %[[SORTED]][%[[S]]]
// CHECK:   %[[ROW:.+]] = arith.divui %[[KEY]], %[[N]] : i64
// CHECK:   %[[NEXT:.+]] = arith.addi %[[S]], %c1 : index
// CHECK:   tensor.extract %[[SORTED]][%[[NEXT]]]
// CHECK:   %[[ENDS:.+]] = arith.cmpi ne
// CHECK:   scf.if %[[ENDS]] -> (tensor<10x3xf32>)
// CHECK:     %[[OWNTILE:.+]] = arith.divui %[[S]], %c12 : index
// CHECK:     %[[EARLIER:.+]] = scf.for %[[TILE:.+]] = %c0 to %c11 step %c1 iter_args(%{{.+}} = %cst{{.*}}) -> (f32)
// CHECK:       arith.cmpi ult, %[[TILE]], %[[OWNTILE]] : index
// CHECK:       tensor.extract %[[TAILS]][%[[TILE]], %[[F]]]
// CHECK:     %[[SUM:.+]] = scf.for %{{.+}} = %c0 to %c12 step %c1 iter_args(%{{.+}} = %[[EARLIER]]) -> (f32)
// CHECK:     %[[R:.+]] = arith.index_cast %[[ROW]] : i64 to index
// CHECK:     tensor.insert %[[SUM]] into %[[G]][%[[R]], %[[F]]] : tensor<10x3xf32>
// CHECK:   } else {
// CHECK:     scf.yield %[[G]]
// CHECK: } {nn.independent_iterations}
// CHECK-NOT: nn.gather_grad
func.func @embedding(%dy: tensor<4x32x3xf32>, %ids: tensor<4x32xi64>) -> tensor<10x3xf32> {
  %g = nn.gather_grad %dy, %ids {axis = 0 : i64} : (tensor<4x32x3xf32>, tensor<4x32xi64>) -> tensor<10x3xf32>
  return %g : tensor<10x3xf32>
}

// -----

// Left to nn-to-linalg's scatter-add: fewer than 64 tokens, a gather along
// another axis, and constant ids (a position embedding's arange).

// CHECK-LABEL: func @left
// CHECK-COUNT-3: nn.gather_grad
// CHECK-NOT: linalg.generic
func.func @left(%dy: tensor<63x3xf32>, %ids: tensor<63xi32>, %dy1: tensor<3x128xf32>,
                %ids1: tensor<128xi64>, %dy2: tensor<128x3xf32>) -> (tensor<10x3xf32>, tensor<3x10xf32>, tensor<128x3xf32>) {
  %g = nn.gather_grad %dy, %ids {axis = 0 : i64} : (tensor<63x3xf32>, tensor<63xi32>) -> tensor<10x3xf32>
  %g1 = nn.gather_grad %dy1, %ids1 {axis = 1 : i64} : (tensor<3x128xf32>, tensor<128xi64>) -> tensor<3x10xf32>
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]> : tensor<128xi64>
  %g2 = nn.gather_grad %dy2, %iota {axis = 0 : i64} : (tensor<128x3xf32>, tensor<128xi64>) -> tensor<128x3xf32>
  return %g, %g1, %g2 : tensor<10x3xf32>, tensor<3x10xf32>, tensor<128x3xf32>
}
