#!/usr/bin/env python3
"""Transcribe Ollama's own template test vectors into tests/data/ollama_template_vectors.json.

Reads a git directory of ollama/ollama (e.g. the one the `fetch` tool or `git clone --bare`
gives) with `git show`, never a work tree, and writes, for every `template/*.gotmpl`:
the template text (CRLF normalised as template.go's templatesOnce does), its
`template/<name>.json` parameters, and the expected render of each case in
`template/testdata/<name>.gotmpl/<case>` -- the outputs Go's text/template produced for
`TestTemplate` in template/template_test.go (the case messages are transcribed from that
test, with the file's line numbers, below).

It also transcribes the tool-calling templates of the Ollama library that Ollama tested
against (`tools/testdata/<model>.gotmpl` with `messages.json`, `tools.json` and the expected
`<model>.out`, rendered by `template.Execute` in tools/tools_test.go `TestParseToolCalls`),
from the last commit that had them (TOOLS_COMMIT, the parent of 9f8a18ec0, which removed them).

Usage: scripts/ollama-template-vectors.py GIT_DIR [COMMIT] > tests/data/ollama_template_vectors.json
"""
import json
import subprocess
import sys

git_dir = sys.argv[1]
commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"


def git(*args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          capture_output=True).stdout


commit = git("rev-parse", commit).decode().strip()
test_go = git("show", f"{commit}:template/template_test.go").decode()

# template_test.go TestTemplate: the three conversations, keyed by their roles joined by "-"
USER = {"role": "user", "content": "Hello, how are you?"}
ASSISTANT = {"role": "assistant", "content": "I'm doing great. How can I help you today?"}
USER2 = {"role": "user", "content": "I'd like to show off how chat templating works!"}
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CASES = {
    "user": [USER],
    "user-assistant-user": [USER, ASSISTANT, USER2],
    "system-user-assistant-user": [SYSTEM, USER, ASSISTANT, USER2],
}
# check the transcription against the test source: every content string must be there
for msgs in CASES.values():
    for m in msgs:
        needle = json.dumps(m["content"])
        if needle not in test_go:
            sys.exit(f"template_test.go at {commit} no longer has {needle}: re-transcribe")
line = next(i + 1 for i, l in enumerate(test_go.splitlines()) if "func TestTemplate(" in l)
trim = next(l for l in test_go.splitlines() if "removing trailing space from output" in l or
            ("slices.Contains([]string{" in l and "bts[len(bts)-1] == ' '" in l))

names = [p.split("/")[-1][:-len(".gotmpl")]
         for p in git("ls-tree", "--name-only", f"{commit}", "template/").decode().split()
         if p.endswith(".gotmpl")]
templates = []
for name in sorted(names):
    text = git("show", f"{commit}:template/{name}.gotmpl").decode().replace("\r\n", "\n")
    try:
        params = json.loads(git("show", f"{commit}:template/{name}.json"))
    except subprocess.CalledProcessError:
        params = None
    cases = {}
    for case in CASES:
        try:
            cases[case] = git("show", f"{commit}:template/testdata/{name}.gotmpl/{case}").decode()
        except subprocess.CalledProcessError:
            pass
    templates.append({"name": name, "template": text, "parameters": params, "expected": cases})

tools_commit = git("rev-parse", "9f8a18ec0^").decode().strip()
tools_test = git("show", f"{tools_commit}:tools/tools_test.go").decode()
tools_line = next(i + 1 for i, l in enumerate(tools_test.splitlines())
                  if "tmpl.Execute(actual, template.Values{Tools: tools, Messages: messages})" in l)
tool_names = sorted(p.split("/")[-1][:-len(".gotmpl")]
                    for p in git("ls-tree", "--name-only", tools_commit, "tools/testdata/").decode().split()
                    if p.endswith(".gotmpl"))
tool_templates = []
for name in tool_names:
    try:
        out = git("show", f"{tools_commit}:tools/testdata/{name}.out").decode()
    except subprocess.CalledProcessError:
        continue
    tool_templates.append({
        "name": name,
        "template": git("show", f"{tools_commit}:tools/testdata/{name}.gotmpl").decode(),
        "expected": out,
    })

json.dump({
    "source": "github.com/ollama/ollama",
    "commit": commit,
    "files": "template/*.gotmpl, template/*.json, template/testdata/*.gotmpl/*",
    "test": f"template/template_test.go:{line} TestTemplate",
    "trailing_space_rule": trim.strip(),
    "trailing_space_trimmed": ["chatqa.gotmpl", "llama2-chat.gotmpl", "mistral-instruct.gotmpl",
                               "openchat.gotmpl", "vicuna.gotmpl"],
    "cases": CASES,
    "templates": templates,
    "tools": {
        "commit": tools_commit,
        "files": "tools/testdata/*.gotmpl, *.out, messages.json, tools.json",
        "test": f"tools/tools_test.go:{tools_line} TestParseToolCalls (the \"template\" subtest)",
        "messages": json.loads(git("show", f"{tools_commit}:tools/testdata/messages.json")),
        "tools": json.loads(git("show", f"{tools_commit}:tools/testdata/tools.json")),
        "templates": tool_templates,
    },
}, sys.stdout, indent=1, ensure_ascii=False)
sys.stdout.write("\n")
