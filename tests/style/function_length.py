#!/usr/bin/env python3
"""Fails when a function of the project is longer than a limit (default 120
lines, from its head's opening brace to its closing one in C++, from `def` to
its last line in Python).

  function_length.py ROOT [LIMIT]   lists each longer function; exit 1 if any
  function_length.py --self-test    checks the scanner on made-up sources

C++ is scanned, not parsed: comments, string and character literals and
preprocessor lines are blanked, then a brace opens a function body when the
text before it (back to the previous ; { or }) holds a parameter list and is
not a namespace, class, struct, union or enum head, a control statement or a
braced initializer. Lambdas and local classes count towards the function that
holds them. Python is parsed with ast; nested functions count towards the
outer one. Shell scripts are not scanned.
"""
import ast, os, re, sys

def strip_cpp(text):
    # Blank out comments, string and character literals, keeping newlines.
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(')' + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            if c == "'" and i > 0 and (text[i-1].isalnum()):  # digit separator 1'000
                out.append(' '); i += 1; continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (j - i - 1) + c)
            i = j + 1
        elif c == '#' and (i == 0 or text[i-1] == '\n'):
            j = i
            while True:  # preprocessor line with continuations
                k = text.find('\n', j)
                if k < 0: k = n; break
                if text[k-1] != '\\': break
                j = k + 1
            out.append(re.sub(r'[^\n]', ' ', text[i:k]))
            i = k
        else:
            out.append(c); i += 1
    return ''.join(out)

NOT_FUNC = re.compile(r'\b(namespace|class|struct|union|enum)\b|=\s*$|\bextern\b')
CONTROL = re.compile(r'\b(if|for|while|switch|catch|do|else|try)\s*$')

def cpp_functions(path):
    text = strip_cpp(open(path, encoding='utf-8', errors='replace').read())
    stack = []  # (kind, start offset, name)
    last = 0    # offset after the last ; { or } at the current level
    res = []
    for m in re.finditer(r'[{};]', text):
        ch, at = m.group(), m.start()
        if ch == '{':
            head = text[last:at]
            in_func = any(k == 'func' for k, _, _ in stack)
            kind = 'other'
            if not in_func:
                h = head.strip()
                if ')' in h and not NOT_FUNC.search(h.split('(')[0] + ' ') and not re.search(r'=\s*$', h) \
                        and not CONTROL.search(h):
                    kind = 'func'
                elif re.search(r'\b(namespace|class|struct|union)\b', h):
                    kind = 'scope'
            name = ''
            if kind == 'func':
                sig = ' '.join(head.split())
                mm = re.search(r'([~\w:<>]+)\s*\(', sig)
                name = mm.group(1) if mm else sig[:60]
            stack.append((kind, at, name))
            last = at + 1
        elif ch == '}':
            if stack:
                kind, start, name = stack.pop()
                if kind == 'func':
                    l0 = text.count('\n', 0, start) + 1
                    l1 = text.count('\n', 0, at) + 1
                    res.append((l1 - l0 + 1, l0, name))
            last = at + 1
        else:
            last = at + 1
    return res

def py_functions(path):
    tree = ast.parse(open(path, encoding='utf-8').read())
    res = []
    def walk(node, inside):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)) and not inside:
                res.append((ch.end_lineno - ch.lineno + 1, ch.lineno, ch.name))
                walk(ch, True)
            else:
                walk(ch, inside)
    walk(tree, False)
    return res

def is_python(path):
    if path.endswith('.py'): return True
    if os.path.splitext(path)[1]: return False
    try:
        first = open(path, 'rb').readline()
    except OSError:
        return False
    return first.startswith(b'#!') and b'python' in first

def scan(root, limit):
    skip = {'build', 'results', '.git'}
    bad = []
    for dp, dn, fn in os.walk(root):
        dn[:] = sorted(d for d in dn if not (dp == root and d in skip))
        for f in fn:
            p = os.path.join(dp, f)
            if f.endswith(('.cpp', '.hpp', '.h', '.cc', '.cu', '.in')) and not f.endswith('.py.in'):
                fs = cpp_functions(p)
            elif is_python(p):
                fs = py_functions(p)
            else:
                continue
            for length, line, name in fs:
                if length > limit:
                    bad.append((length, os.path.relpath(p, root), line, name))
    return sorted(bad, reverse=True)


def self_test():
    import tempfile
    def cpp_func(name, body_lines):
        # head, body_lines, return and closing lines: body_lines + 3 lines
        return (f'int {name}(int a) {{\n' + ''.join(f'  a += {i}; // }} {{ "{{"\n' for i in range(body_lines))
                + '  return a;\n}\n')
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, 'kernels'))
        os.makedirs(os.path.join(t, 'tests'))
        cpp = ('namespace x {\nstruct S {\n  int v[3] = {1, 2, 3};\n' + cpp_func('in_class', 200) + '};\n'
               + 'const char* s = "{{{";\n/* { */\n#define OPEN {\n'
               + cpp_func('exactly', 117) + cpp_func('one_over', 118)
               + 'int with_lambda() {\n  auto f = [] {\n' + '    ;\n' * 130 + '  };\n  return 0;\n}\n}  // namespace x\n')
        open(os.path.join(t, 'kernels', 'a.cpp'), 'w').write(cpp)
        py = 'def short():\n    return 1\n\n\ndef long_one():\n' + '    x = 1\n' * 130 + '\n\ndef outer():\n    def inner():\n' + '        y = 2\n' * 125 + '    return inner\n'
        open(os.path.join(t, 'tests', 'b.py'), 'w').write(py)
        got = {(p, name, length) for length, p, line, name in scan(t, 120)}
        want = {('kernels/a.cpp', 'in_class', 203), ('kernels/a.cpp', 'one_over', 121),
                ('kernels/a.cpp', 'with_lambda', 135), ('tests/b.py', 'long_one', 131), ('tests/b.py', 'outer', 128)}
        if got != want:
            print('function_length.py self-test FAILED')
            print('  found:   ', sorted(got))
            print('  expected:', sorted(want))
            return 1
    print('function_length.py self-test passed')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    limit = int(sys.argv[2]) if len(sys.argv) == 3 else 120
    bad = scan(sys.argv[1], limit)
    for length, p, line, name in bad:
        print(f'{p}:{line}: {name} is {length} lines (limit {limit})')
    if not bad:
        print(f'no function longer than {limit} lines')
    return 1 if bad else 0


sys.exit(main())
