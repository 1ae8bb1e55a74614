// Package apicheck computes the listing of the module's public API, one
// line per exported identifier in the spirit of Go's own api/go1.*.txt,
// which its test compares with the checked-in api/v1.txt: a change to the
// public API is then a deliberate diff in review.
//
// The lines are, for a package at path p relative to the module root:
//
//	pkg p, const Name T = value           (T only for typed constants)
//	pkg p, var Name T
//	pkg p, func Name(A, B) (C, error)
//	pkg p, method (*T) Name(A) error
//	pkg p, type T struct
//	pkg p, type T struct, Field F json:"field,omitempty"   (the field's tag, if any)
//	pkg p, type T struct, embedded E
//	pkg p, type T interface
//	pkg p, type T interface, Method(A) B
//	pkg p, type T interface, embedded I
//	pkg p, type T interface, unexported methods
//	pkg p, type T func(*Request)           (any other defined type)
//	pkg p, type T = U                      (an alias)
//
// Types are printed as written in the source, parameter names left out.
// Constant values are the exact values go/types computes (a changed error
// type string or default is an API change too): the constants of the
// standard library and of the module's own packages they refer to are
// type-checked from source; a value that still cannot be computed (one
// from another module) is printed as written.
package apicheck

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// skipTop are the directories at the module root that hold no package
// users import: commands, tools, benchmarks, the test harness, the
// integration and interop suites and the examples. Below them nothing is
// listed. Any other
// library package of the module is public, and is listed, unless a
// directory on its path is named internal or testdata, starts with . or _,
// or holds a module of its own (a go.mod).
var skipTop = map[string]bool{
	"cmd":         true,
	"tools":       true,
	"bench":       true,
	"harness":     true,
	"integration": true,
	"interop":     true,
	"examples":    true,
}

// Package is one public package of the module.
type Package struct {
	Rel   string      // the path relative to the module root, slash-separated ("." at the root)
	Name  string      // the package name
	Files []*ast.File // its non-test Go files for linux/amd64, sorted by name
}

// ModuleRoot returns the directory of the go.mod at or above dir, and the
// module path it declares.
func ModuleRoot(dir string) (root, modPath string, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			modPath = modulePath(string(data))
			if modPath == "" {
				return "", "", fmt.Errorf("%s: no module line", filepath.Join(dir, "go.mod"))
			}
			return dir, modPath, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// modulePath returns the path of the module line of a go.mod file.
func modulePath(gomod string) string {
	sc := bufio.NewScanner(strings.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"') {
			continue
		}
		rest = strings.TrimSpace(rest)
		if s, err := strconv.Unquote(rest); err == nil {
			return s
		}
		return rest
	}
	return ""
}

// buildContext is the fixed platform the files are selected for, so the
// listing does not depend on the machine that computes it.
func buildContext() build.Context {
	ctx := build.Default
	ctx.GOOS = "linux"
	ctx.GOARCH = "amd64"
	ctx.CgoEnabled = false
	ctx.BuildTags = nil
	ctx.ToolTags = nil
	return ctx
}

// goFiles returns the sorted names of the non-test Go files of dir that
// build on ctx's platform.
func goFiles(ctx *build.Context, dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		ok, err := ctx.MatchFile(dir, name)
		if err != nil {
			return nil, err
		}
		if ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// parseDir parses the files of dir that goFiles selects.
func parseDir(fset *token.FileSet, ctx *build.Context, dir string) ([]*ast.File, error) {
	names, err := goFiles(ctx, dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// Packages walks the module at root and returns its public packages, sorted
// by path: every directory not skipped (see skipTop) whose non-test Go
// files make a package other than main.
func Packages(fset *token.FileSet, root string) ([]Package, error) {
	ctx := buildContext()
	var pkgs []Package
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." {
			name := d.Name()
			if (!strings.Contains(rel, "/") && skipTop[name]) ||
				name == "internal" || name == "testdata" || name == "vendor" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		files, err := parseDir(fset, &ctx, p)
		if err != nil {
			return err
		}
		if len(files) == 0 || files[0].Name.Name == "main" {
			return nil
		}
		pkgs = append(pkgs, Package{Rel: rel, Name: files[0].Name.Name, Files: files})
		return nil
	})
	return pkgs, err
}

// Listing returns the sorted listing of every public package of the
// module at root.
func Listing(root string) ([]string, error) {
	root, modPath, err := ModuleRoot(root)
	if err != nil {
		return nil, err
	}
	l := NewLister(root, modPath)
	pkgs, err := Packages(l.fset, root)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, p := range pkgs {
		name := p.Rel
		if name == "." {
			name = modPath
		}
		lines = append(lines, l.List(name, path.Join(modPath, p.Rel), p.Files)...)
	}
	slices.Sort(lines)
	return slices.Compact(lines), nil
}

// A Lister lists packages. It type-checks the constant declarations of the
// packages of the standard library and of the module that the listed
// constants depend on, from source, and caches them.
type Lister struct {
	root, modPath string // the module's directory and path; "" when there is none
	fset          *token.FileSet
	ctx           build.Context
	deps          map[string]*types.Package // stripped packages by path; nil while loading
	fakes         map[string]*types.Package // empty stand-ins by path
	names         map[string]string         // package names by path
}

// NewLister returns a Lister for the module at root with path modPath;
// both may be empty (only the standard library is then looked up).
func NewLister(root, modPath string) *Lister {
	return &Lister{
		root:    root,
		modPath: modPath,
		fset:    token.NewFileSet(),
		ctx:     buildContext(),
		deps:    map[string]*types.Package{},
		fakes:   map[string]*types.Package{},
		names:   map[string]string{},
	}
}

// FileSet returns the file set the files handed to List must come from.
func (l *Lister) FileSet() *token.FileSet { return l.fset }

// List returns the listing of the package with the given files, its lines
// starting with "pkg name, ", sorted. importPath is the path the package
// is type-checked under.
func (l *Lister) List(name, importPath string, files []*ast.File) []string {
	pkg, info := l.check(importPath, files)
	w := &writer{prefix: "pkg " + name + ", ", pkg: pkg, info: info}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				w.funcDecl(d)
			case *ast.GenDecl:
				switch d.Tok {
				case token.CONST:
					w.constDecl(d)
				case token.VAR:
					w.varDecl(d)
				case token.TYPE:
					for _, s := range d.Specs {
						w.typeSpec(s.(*ast.TypeSpec))
					}
				}
			}
		}
	}
	slices.Sort(w.lines)
	return slices.Compact(w.lines)
}

// check type-checks files, ignoring errors: only the values of constants
// and the types of variables declared without one are taken from it.
func (l *Lister) check(importPath string, files []*ast.File) (*types.Package, *types.Info) {
	info := &types.Info{
		Defs:  map[*ast.Ident]types.Object{},
		Types: map[ast.Expr]types.TypeAndValue{},
	}
	conf := types.Config{
		Importer: l.importer(files),
		Error:    func(error) {},
	}
	pkg, _ := conf.Check(importPath, l.fset, files, info)
	return pkg, info
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// importer returns the importer for files: the packages their constant
// declarations refer to are loaded (stripped: see load), every other
// import is an empty stand-in, which keeps type-checking cheap.
func (l *Lister) importer(files []*ast.File) types.Importer {
	needed := map[string]bool{}
	for _, f := range files {
		used := map[string]bool{}
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.CONST {
				ast.Inspect(d, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok {
							used[id.Name] = true
						}
					}
					return true
				})
			}
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				continue
			}
			name := ""
			if imp.Name != nil {
				name = imp.Name.Name
			} else {
				name = l.packageName(p)
			}
			if used[name] || name == "." {
				needed[p] = true
			}
		}
	}
	return importerFunc(func(p string) (*types.Package, error) {
		if needed[p] {
			if pkg := l.load(p); pkg != nil {
				return pkg, nil
			}
		}
		return l.fake(p), nil
	})
}

// dir returns the source directory of the package at path p, if it is in
// the standard library or the module.
func (l *Lister) dir(p string) (string, bool) {
	if l.modPath != "" && (p == l.modPath || strings.HasPrefix(p, l.modPath+"/")) {
		return filepath.Join(l.root, filepath.FromSlash(strings.TrimPrefix(p, l.modPath))), true
	}
	first, _, _ := strings.Cut(p, "/")
	if strings.Contains(first, ".") || p == "C" || l.ctx.GOROOT == "" {
		return "", false
	}
	return filepath.Join(l.ctx.GOROOT, "src", filepath.FromSlash(p)), true
}

// packageName returns the name of the package at path p: for one of the
// module, read from the package clause of its first Go file; else (the
// standard library, other modules) guessed from the path.
func (l *Lister) packageName(p string) string {
	if name, ok := l.names[p]; ok {
		return name
	}
	name := guessName(p)
	if l.modPath != "" && (p == l.modPath || strings.HasPrefix(p, l.modPath+"/")) {
		dir, _ := l.dir(p)
		if names, err := goFiles(&l.ctx, dir); err == nil && len(names) > 0 {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, names[0]), nil, parser.PackageClauseOnly)
			if err == nil {
				name = f.Name.Name
			}
		}
	}
	l.names[p] = name
	return name
}

// guessName guesses a package's name from its path: the last element
// that is not a major version, up to its first dot or dash.
func guessName(p string) string {
	elems := strings.Split(p, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = elems[len(elems)-2]
	}
	name = strings.TrimPrefix(name, "go-")
	if i := strings.IndexAny(name, ".-"); i > 0 {
		name = name[:i]
	}
	return name
}

// fake returns an empty, complete package standing in for the one at p.
func (l *Lister) fake(p string) *types.Package {
	if pkg, ok := l.fakes[p]; ok {
		return pkg
	}
	pkg := types.NewPackage(p, guessName(p))
	pkg.MarkComplete()
	l.fakes[p] = pkg
	return pkg
}

// load returns the package at path p type-checked from its source with
// only its import, constant and type declarations, or nil if its source is
// not at hand (another module) or it imports itself back.
func (l *Lister) load(p string) *types.Package {
	if pkg, ok := l.deps[p]; ok {
		return pkg // nil while it is loading: a cycle
	}
	dir, ok := l.dir(p)
	if !ok {
		return nil
	}
	l.deps[p] = nil
	files, err := parseDir(l.fset, &l.ctx, dir)
	if err != nil || len(files) == 0 {
		return nil
	}
	for _, f := range files {
		f.Decls = slices.DeleteFunc(f.Decls, func(d ast.Decl) bool {
			g, ok := d.(*ast.GenDecl)
			return !ok || g.Tok == token.VAR
		})
	}
	conf := types.Config{Importer: l.importer(files), Error: func(error) {}}
	pkg, _ := conf.Check(p, l.fset, files, nil)
	l.deps[p] = pkg
	return pkg
}

// writer collects the lines of one package.
type writer struct {
	prefix string
	pkg    *types.Package
	info   *types.Info
	lines  []string
}

func (w *writer) add(format string, args ...any) {
	w.lines = append(w.lines, w.prefix+fmt.Sprintf(format, args...))
}

// qualifier prints other packages by name, the listed one not at all.
func (w *writer) qualifier(p *types.Package) string {
	if p == w.pkg {
		return ""
	}
	return p.Name()
}

func (w *writer) funcDecl(d *ast.FuncDecl) {
	if !d.Name.IsExported() {
		return
	}
	if d.Recv == nil {
		w.add("func %s%s%s", d.Name.Name, typeParams(d.Type.TypeParams), signature(d.Type))
		return
	}
	if len(d.Recv.List) != 1 || !receiverExported(d.Recv.List[0].Type) {
		return
	}
	w.add("method (%s) %s%s", typeString(d.Recv.List[0].Type), d.Name.Name, signature(d.Type))
}

// receiverExported reports whether the base type of a receiver is exported.
func receiverExported(t ast.Expr) bool {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// constDecl lists the exported constants of d, with their exact values
// where they can be computed.
func (w *writer) constDecl(d *ast.GenDecl) {
	var typ ast.Expr
	var values []ast.Expr
	for iota, s := range d.Specs {
		spec := s.(*ast.ValueSpec)
		if spec.Type != nil || len(spec.Values) > 0 {
			typ, values = spec.Type, spec.Values // else the implicit repetition of the last ones
		}
		for i, name := range spec.Names {
			if !name.IsExported() {
				continue
			}
			if c, ok := w.info.Defs[name].(*types.Const); ok && c.Val().Kind() != constant.Unknown && valid(c.Type()) {
				t := ""
				if b, ok := c.Type().(*types.Basic); !ok || b.Info()&types.IsUntyped == 0 {
					t = " " + types.TypeString(c.Type(), w.qualifier)
				}
				w.add("const %s%s = %s", name.Name, t, c.Val().ExactString())
				continue
			}
			t, v := "", ""
			if typ != nil {
				t = " " + typeString(typ)
			}
			if i < len(values) {
				v = types.ExprString(values[i])
				if strings.Contains(v, "iota") {
					v += fmt.Sprintf(" (iota = %d)", iota)
				}
			}
			w.add("const %s%s = %s", name.Name, t, v)
		}
	}
}

// varDecl lists the exported variables of d with their types: as written,
// else as computed, else (from another module) the value as written.
func (w *writer) varDecl(d *ast.GenDecl) {
	for _, s := range d.Specs {
		spec := s.(*ast.ValueSpec)
		for i, name := range spec.Names {
			if !name.IsExported() {
				continue
			}
			switch v, _ := w.info.Defs[name].(*types.Var); {
			case spec.Type != nil:
				w.add("var %s %s", name.Name, typeString(spec.Type))
			case v != nil && valid(v.Type()):
				w.add("var %s %s", name.Name, types.TypeString(unnamed(v.Type()), w.qualifier))
			case len(spec.Values) == len(spec.Names):
				w.add("var %s = %s", name.Name, types.ExprString(spec.Values[i]))
			default:
				w.add("var %s", name.Name)
			}
		}
	}
}

// unnamed returns t, a function type without the names of its
// parameters and results, as the listing prints them.
func unnamed(t types.Type) types.Type {
	sig, ok := t.(*types.Signature)
	if !ok || sig.Recv() != nil || sig.TypeParams().Len() > 0 {
		return t
	}
	strip := func(tup *types.Tuple) *types.Tuple {
		var vars []*types.Var
		for v := range tup.Variables() {
			vars = append(vars, types.NewParam(v.Pos(), v.Pkg(), "", v.Type()))
		}
		return types.NewTuple(vars...)
	}
	return types.NewSignatureType(nil, nil, nil, strip(sig.Params()), strip(sig.Results()), sig.Variadic())
}

// valid reports whether t and the types it is made of are all valid.
func valid(t types.Type) bool {
	ok := true
	var visit func(t types.Type, depth int)
	visit = func(t types.Type, depth int) {
		if !ok || depth > 10 {
			return
		}
		switch t := t.(type) {
		case nil:
			ok = false
		case *types.Basic:
			if t.Kind() == types.Invalid {
				ok = false
			}
		case *types.Pointer:
			visit(t.Elem(), depth+1)
		case *types.Slice:
			visit(t.Elem(), depth+1)
		case *types.Array:
			visit(t.Elem(), depth+1)
		case *types.Map:
			visit(t.Key(), depth+1)
			visit(t.Elem(), depth+1)
		case *types.Chan:
			visit(t.Elem(), depth+1)
		case *types.Tuple:
			for v := range t.Variables() {
				visit(v.Type(), depth+1)
			}
		case *types.Signature:
			visit(t.Params(), depth+1)
			visit(t.Results(), depth+1)
		case *types.Named:
			visit(t.Underlying(), depth+1)
		case *types.Alias:
			visit(types.Unalias(t), depth+1)
		}
	}
	visit(t, 0)
	return ok
}

func (w *writer) typeSpec(s *ast.TypeSpec) {
	if !s.Name.IsExported() {
		return
	}
	head := "type " + s.Name.Name + typeParams(s.TypeParams)
	if s.Assign.IsValid() {
		w.add("%s = %s", head, typeString(s.Type))
		return
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		head += " struct"
		w.add("%s", head)
		for _, f := range t.Fields.List {
			tag := ""
			if f.Tag != nil {
				if s, err := strconv.Unquote(f.Tag.Value); err == nil {
					tag = " " + s
				} else {
					tag = " " + f.Tag.Value
				}
			}
			if len(f.Names) == 0 {
				w.add("%s, embedded %s%s", head, typeString(f.Type), tag)
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					w.add("%s, %s %s%s", head, n.Name, typeString(f.Type), tag)
				}
			}
		}
	case *ast.InterfaceType:
		head += " interface"
		w.add("%s", head)
		unexported := false
		for _, f := range t.Methods.List {
			if len(f.Names) == 0 {
				w.add("%s, embedded %s", head, typeString(f.Type))
				continue
			}
			for _, n := range f.Names {
				if !n.IsExported() {
					unexported = true
					continue
				}
				if ft, ok := f.Type.(*ast.FuncType); ok {
					w.add("%s, %s%s", head, n.Name, signature(ft))
				}
			}
		}
		if unexported {
			w.add("%s, unexported methods", head)
		}
	default:
		w.add("%s %s", head, typeString(s.Type))
	}
}

// typeParams prints a type parameter list as written: [K comparable, V any].
func typeParams(fl *ast.FieldList) string {
	if fl == nil || len(fl.List) == 0 {
		return ""
	}
	var parts []string
	for _, f := range fl.List {
		names := make([]string, len(f.Names))
		for i, n := range f.Names {
			names[i] = n.Name
		}
		parts = append(parts, strings.Join(names, ", ")+" "+typeString(f.Type))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// signature prints the parameters and results of ft without their names:
// (A, A, ...B) (C, error).
func signature(ft *ast.FuncType) string {
	s := "(" + strings.Join(fieldTypes(ft.Params), ", ") + ")"
	res := fieldTypes(ft.Results)
	switch len(res) {
	case 0:
	case 1:
		s += " " + res[0]
	default:
		s += " (" + strings.Join(res, ", ") + ")"
	}
	return s
}

// fieldTypes returns the type of each parameter of fl, once per name.
func fieldTypes(fl *ast.FieldList) []string {
	if fl == nil {
		return nil
	}
	var out []string
	for _, f := range fl.List {
		t := typeString(f.Type)
		for range max(1, len(f.Names)) {
			out = append(out, t)
		}
	}
	return out
}

// typeString prints a type expression as written, on one line, with the
// parameter names of function types left out.
func typeString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return typeString(t.X) + "." + t.Sel.Name
	case *ast.StarExpr:
		return "*" + typeString(t.X)
	case *ast.ParenExpr:
		return "(" + typeString(t.X) + ")"
	case *ast.Ellipsis:
		return "..." + typeString(t.Elt)
	case *ast.ArrayType:
		if t.Len == nil {
			return "[]" + typeString(t.Elt)
		}
		return "[" + types.ExprString(t.Len) + "]" + typeString(t.Elt)
	case *ast.MapType:
		return "map[" + typeString(t.Key) + "]" + typeString(t.Value)
	case *ast.ChanType:
		switch t.Dir {
		case ast.SEND:
			return "chan<- " + typeString(t.Value)
		case ast.RECV:
			return "<-chan " + typeString(t.Value)
		}
		return "chan " + typeString(t.Value)
	case *ast.FuncType:
		return "func" + signature(t)
	case *ast.StructType:
		var fields []string
		for _, f := range t.Fields.List {
			s := typeString(f.Type)
			if len(f.Names) > 0 {
				names := make([]string, len(f.Names))
				for i, n := range f.Names {
					names[i] = n.Name
				}
				s = strings.Join(names, ", ") + " " + s
			}
			if f.Tag != nil {
				s += " " + f.Tag.Value
			}
			fields = append(fields, s)
		}
		return "struct{" + strings.Join(fields, "; ") + "}"
	case *ast.InterfaceType:
		var elems []string
		for _, f := range t.Methods.List {
			if ft, ok := f.Type.(*ast.FuncType); ok && len(f.Names) > 0 {
				for _, n := range f.Names {
					elems = append(elems, n.Name+signature(ft))
				}
				continue
			}
			elems = append(elems, typeString(f.Type))
		}
		return "interface{" + strings.Join(elems, "; ") + "}"
	case *ast.IndexExpr:
		return typeString(t.X) + "[" + typeString(t.Index) + "]"
	case *ast.IndexListExpr:
		args := make([]string, len(t.Indices))
		for i, x := range t.Indices {
			args[i] = typeString(x)
		}
		return typeString(t.X) + "[" + strings.Join(args, ", ") + "]"
	case *ast.UnaryExpr:
		return t.Op.String() + typeString(t.X)
	case *ast.BinaryExpr:
		return typeString(t.X) + " " + t.Op.String() + " " + typeString(t.Y)
	}
	return types.ExprString(e)
}

// TopLevel counts the exported top-level identifiers of a listing by
// package: its const, var, func and type lines. The lines of methods, of
// struct fields and of interface methods and embeddings are not counted:
// a member's line is its type's line followed by ", ".
func TopLevel(lines []string) map[string]int {
	listed := map[string]bool{}
	for _, l := range lines {
		listed[l] = true
	}
	counts := map[string]int{}
	for _, l := range lines {
		pkg, decl, ok := strings.Cut(strings.TrimPrefix(l, "pkg "), ", ")
		if !ok || strings.HasPrefix(decl, "method ") || member(l, listed) {
			continue
		}
		counts[pkg]++
	}
	return counts
}

// member reports whether l is the line of a struct field or an interface
// method or embedding: a listed "type T struct" or "type T interface"
// line, then ", ".
func member(l string, listed map[string]bool) bool {
	for _, kind := range []string{" struct, ", " interface, "} {
		for i := 0; ; {
			j := strings.Index(l[i:], kind)
			if j < 0 {
				break
			}
			if listed[l[:i+j+len(kind)-2]] {
				return true
			}
			i += j + 1
		}
	}
	return false
}

// Total is the sum of counts.
func Total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// Render returns the content of the listing file: its header, with the
// count of exported top-level identifiers (TopLevel) and of lines, then
// the lines.
func Render(modPath string, lines []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# The public API of %s: one line per exported identifier.\n", modPath)
	b.WriteString("# Generated; a change is deliberate: go test ./harness/apicheck -update\n")
	counts := TopLevel(lines)
	pkgs := slices.Sorted(maps.Keys(counts))
	per := make([]string, len(pkgs))
	for i, p := range pkgs {
		per[i] = fmt.Sprintf("%s %d", p, counts[p])
	}
	fmt.Fprintf(&b, "# %d exported top-level identifiers (%s), %d lines.\n", Total(counts), strings.Join(per, ", "), len(lines))
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// Parse returns the lines of a listing file without its comments and blank
// lines.
func Parse(data []byte) []string {
	var lines []string
	for l := range strings.Lines(string(data)) {
		l = strings.TrimRight(l, "\r\n")
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// Diff returns the lines only in old, prefixed "-", and the ones only in
// new, prefixed "+", in sorted order, with a unified diff's header.
func Diff(oldName, newName string, old, new []string) string {
	inOld, inNew := map[string]bool{}, map[string]bool{}
	for _, l := range old {
		inOld[l] = true
	}
	for _, l := range new {
		inNew[l] = true
	}
	all := slices.Concat(old, new)
	slices.Sort(all)
	all = slices.Compact(all)
	var b strings.Builder
	for _, l := range all {
		switch {
		case inOld[l] && !inNew[l]:
			b.WriteString("-" + l + "\n")
		case inNew[l] && !inOld[l]:
			b.WriteString("+" + l + "\n")
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "--- " + oldName + "\n+++ " + newName + "\n" + b.String()
}
