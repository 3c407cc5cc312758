// Command expcount counts the exported identifiers of the packages in the
// folders it is given, as go doc shows them: top-level constants,
// variables, functions and types, and the exported methods and struct
// fields of exported types (test files left out).
//
//	go run ./scripts/expcount ledger sequence numbering vault
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	for _, dir := range os.Args[1:] {
		files, err := parseDir(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "expcount:", err)
			os.Exit(1)
		}
		top, methods, fields := count(files)
		fmt.Printf("%-10s top-level %3d  methods %3d  fields %3d  total %3d\n", dir, top, methods, fields, top+methods+fields)
	}
}

// parseDir parses the non-test Go files of dir.
func parseDir(dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// count counts the exported names of files.
func count(files []*ast.File) (top, methods, fields int) {
	exported := map[string]bool{}
	names := func(ids []*ast.Ident) (n int) {
		for _, id := range ids {
			if id.IsExported() {
				n++
			}
		}
		return n
	}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					top += names(s.Names)
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					top++
					exported[s.Name.Name] = true
					switch t := s.Type.(type) {
					case *ast.StructType:
						for _, fl := range t.Fields.List {
							fields += names(fl.Names)
						}
					case *ast.InterfaceType:
						for _, m := range t.Methods.List {
							methods += names(m.Names)
						}
					}
				}
			}
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			if fd.Recv == nil {
				top++
				continue
			}
			t := fd.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			switch ix := t.(type) {
			case *ast.IndexExpr:
				t = ix.X
			case *ast.IndexListExpr:
				t = ix.X
			}
			if id, ok := t.(*ast.Ident); ok && exported[id.Name] {
				methods++
			}
		}
	}
	return top, methods, fields
}
