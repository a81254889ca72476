#!/usr/bin/env python3
"""Writes the generated part of the fuzz seed corpora into OUT_DIR/<target>/:
chat templates from the Jinja test data, JSON schemas and GBNF/regex samples
from the grammar tests, request bodies from the request-parser tests, small
GGUF files and tokenizer texts from the shared test models (MODELS_DIR).
and a few hand-written HTTP requests.
Run: python3 fuzz/make_seeds.py OUT_DIR [MODELS_DIR]
"""
import glob
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(out, target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def raw_strings(path):
    text = open(path, encoding="utf-8").read()
    # R"delim( ... )delim"
    return [m.group(2) for m in re.finditer(r'R"([^(\s]*)\((.*?)\)\1"', text, re.S)]


def c_strings(path):
    text = open(path, encoding="utf-8").read()
    out = []
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', text):
        try:
            out.append(bytes(m.group(1), "utf-8").decode("unicode_escape"))
        except UnicodeDecodeError:
            pass
    return out


def main():
    out = sys.argv[1]
    models = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "..", "shared", "models")
    for p in glob.glob(os.path.join(ROOT, "src/jinja/*testdata.h")) + \
            glob.glob(os.path.join(ROOT, "src/server/tool_calls_testdata.h")):
        for t in raw_strings(p):
            if "{%" in t or "{{" in t:
                write(out, "jinja", t + "\xff" + "Hi <b>there</b>")
    for p in glob.glob(os.path.join(ROOT, "src/grammar/json_schema_test.cc")):
        for s in raw_strings(p):
            if s.lstrip().startswith("{"):
                write(out, "grammar", "\x00" + s)
    for p in glob.glob(os.path.join(ROOT, "src/grammar/gbnf_test.cc")):
        for s in raw_strings(p) + c_strings(p):
            if "::=" in s:
                write(out, "grammar", "\x01" + s)
    for p in glob.glob(os.path.join(ROOT, "src/grammar/regex_test.cc")):
        for s in c_strings(p)[:200]:
            write(out, "grammar", "\x02" + s)
    for p in glob.glob(os.path.join(ROOT, "src/server/request_parser_test.cc")):
        for s in raw_strings(p):
            if s.lstrip().startswith("{"):
                for endpoint in range(4):
                    write(out, "request_parser", bytes([endpoint]) + s.encode())
    http = [
        b"\x07POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\n"
        b'{"prompt":"a"}GET /health HTTP/1.1\r\n\r\n',
        b"\x03POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
        b"5;x=1\r\nhello\r\n0\r\nT: 1\r\n\r\n",
        b"\x01GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"\x02\r\n\r\nPOST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    ]
    for h in http:
        write(out, "http_parser", h)
    small = [p for p in glob.glob(os.path.join(models, "**/*.gguf"), recursive=True)
             if os.path.getsize(p) <= 2 << 20]
    for p in small:
        write(out, "gguf", open(p, "rb").read())
    for k, p in enumerate(sorted(glob.glob(os.path.join(models, "vocab/*.inp")))):
        cases = open(p, "rb").read().split(b"\n__ggml_vocab_test__\n")
        for i, c in enumerate(cases[:40]):
            write(out, "tokenizer", bytes([(k * 41 + i) % 256, i % 8]) + c)


if __name__ == "__main__":
    main()
