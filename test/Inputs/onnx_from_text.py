#!/usr/bin/env python3
"""Writes a binary ONNX model from ONNX's textual syntax (onnx.parser).

usage: onnx_from_text.py IN.txt OUT.onnx [--names a,b,..] [--truncate BYTES]
                         [--no-check]

Lit tests keep their models as text next to the RUN lines; this turns them
into the .onnx files the tools read. The textual syntax has no node names:
--names gives them, in node order (an empty entry leaves a node unnamed).
--truncate keeps only the first BYTES
bytes (negative: drops that many from the end) to make corrupt files.
"""
import argparse

import onnx
import onnx.parser


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--names", default="")
    ap.add_argument("--truncate", type=int)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    with open(args.input) as f:
        model = onnx.parser.parse_model(f.read())
    for node, name in zip(model.graph.node, args.names.split(",")):
        node.name = name
    if not args.no_check:
        onnx.checker.check_model(model)
    data = model.SerializeToString()
    if args.truncate is not None:
        data = data[: args.truncate]
    with open(args.output, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
