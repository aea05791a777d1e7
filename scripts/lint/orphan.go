package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"sort"
	"strings"
	"unicode"
)

// A decl is a declaration a doc comment can belong to: a func or method,
// a whole const/var/type/import declaration, or one spec of a group.
type decl struct {
	pos, end token.Pos
	names    []string
	group    bool // a parenthesised const/var/type group: comments inside are its specs'
	doc      *ast.CommentGroup
}

// orphans reports the doc comments of f that go/doc drops or gives to
// the wrong declaration:
//
//   - a comment group that reads as the doc of a declaration just below it
//     (its first word, after an article, is the name of one of the next
//     two declarations) but is not attached to it: a blank line or another
//     declaration is in between;
//   - an attached doc that starts with the name of another declaration of
//     the package (names lists them) while a later line starts with its own
//     name: the first line belonged to a declaration that moved or went;
//   - an attached doc that starts with its declaration's name in another
//     case ("validate" on Validate): a rename left it behind.
//
// Comments inside function bodies and type bodies are not docs.
func orphans(fset *token.FileSet, f *ast.File, names map[string]bool) []string {
	trailing := map[*ast.CommentGroup]bool{} // line comments after a spec
	groupDocs := map[*ast.CommentGroup]bool{}
	var decls []decl
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			decls = append(decls, decl{pos: d.Pos(), end: d.End(), names: []string{d.Name.Name}, doc: d.Doc})
		case *ast.GenDecl:
			var all []string
			for _, s := range d.Specs {
				names := specNames(s)
				all = append(all, names...)
				switch s := s.(type) {
				case *ast.ValueSpec:
					trailing[s.Comment] = true
				case *ast.TypeSpec:
					trailing[s.Comment] = true
				case *ast.ImportSpec:
					trailing[s.Comment] = true
				}
				if d.Lparen.IsValid() {
					decls = append(decls, decl{pos: s.Pos(), end: s.End(), names: names, doc: specDoc(s)})
				}
			}
			doc := d.Doc
			if !d.Lparen.IsValid() && len(d.Specs) == 1 && specDoc(d.Specs[0]) != nil {
				doc = specDoc(d.Specs[0])
			}
			decls = append(decls, decl{pos: d.Pos(), end: d.End(), names: all, group: d.Lparen.IsValid(), doc: doc})
			if d.Lparen.IsValid() && d.Doc != nil {
				groupDocs[d.Doc] = true // the doc of the whole group, attached
			}
		}
	}
	sort.Slice(decls, func(i, j int) bool { return decls[i].pos < decls[j].pos })
	out := misnamed(fset, f, names)
	for _, c := range f.Comments {
		if c == f.Doc || trailing[c] || groupDocs[c] || inside(decls, c) {
			continue
		}
		word := firstWord(c.Text())
		if word == "" {
			continue
		}
		// The next two declarations after the comment, of any kind; the
		// first may be the one it is attached to.
		seen := 0
		for _, d := range decls {
			if d.pos <= c.End() || d.group {
				continue
			}
			if contains(d.names, word) {
				if d.doc != c {
					p := fset.Position(c.Pos())
					at := fset.Position(d.pos)
					out = append(out, fmt.Sprintf("%s:%d: doc comment for %s is cut off from its declaration at line %d (a blank line or a declaration in between): go/doc drops it; join it to the declaration or reword it",
						p.Filename, p.Line, word, at.Line))
				}
				break
			}
			if seen++; seen == 2 {
				break
			}
		}
	}
	return out
}

// misnamed reports the attached docs whose first line is about another
// declaration, or names their own in another case.
func misnamed(fset *token.FileSet, f *ast.File, names map[string]bool) []string {
	var out []string
	check := func(doc *ast.CommentGroup, name string) {
		if doc == nil {
			return
		}
		lines := strings.Split(strings.TrimSpace(doc.Text()), "\n")
		first := firstWord(lines[0])
		if first == "" || first == name {
			return
		}
		p := fset.Position(doc.Pos())
		if strings.EqualFold(first, name) {
			out = append(out, fmt.Sprintf("%s:%d: the doc of %s starts with %q: rename it in the comment", p.Filename, p.Line, name, first))
			return
		}
		if !names[first] {
			return
		}
		for i, l := range lines[1:] {
			if firstWord(l) == name {
				out = append(out, fmt.Sprintf("%s:%d: the doc of %s starts with a line about %s (its own begins at line %d): move or drop that line",
					p.Filename, p.Line, name, first, p.Line+1+i))
				return
			}
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			check(d.Doc, d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				doc := specDoc(s)
				if doc == nil && !d.Lparen.IsValid() {
					doc = d.Doc
				}
				for _, n := range specNames(s) {
					check(doc, n)
					break // the first name of a spec is the one its doc starts with
				}
			}
		}
	}
	return out
}

func specDoc(s ast.Spec) *ast.CommentGroup {
	switch s := s.(type) {
	case *ast.ValueSpec:
		return s.Doc
	case *ast.TypeSpec:
		return s.Doc
	}
	return nil
}

// declNames adds the names f declares at package level, methods included.
func declNames(f *ast.File, names map[string]bool) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			names[d.Name.Name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				for _, n := range specNames(s) {
					names[n] = true
				}
			}
		}
	}
}

// inside reports whether c lies within a declaration other than a group's
// parentheses: a function body, a struct or interface type, a value.
func inside(decls []decl, c *ast.CommentGroup) bool {
	for _, d := range decls {
		if !d.group && d.pos < c.Pos() && c.End() <= d.end {
			return true
		}
	}
	return false
}

func specNames(s ast.Spec) []string {
	switch s := s.(type) {
	case *ast.ValueSpec:
		var names []string
		for _, n := range s.Names {
			names = append(names, n.Name)
		}
		return names
	case *ast.TypeSpec:
		return []string{s.Name.Name}
	}
	return nil
}

// firstWord is the identifier a doc comment starts with, after an
// article ("A Foo is ..."); "" when the text does not start with one.
func firstWord(text string) string {
	fields := strings.Fields(text)
	if len(fields) > 1 && (fields[0] == "A" || fields[0] == "An" || fields[0] == "The") {
		fields = fields[1:]
	}
	if len(fields) == 0 {
		return ""
	}
	w := strings.TrimRight(fields[0], ".,:;")
	for i, r := range w {
		if !(unicode.IsLetter(r) || r == '_' || (i > 0 && unicode.IsDigit(r))) {
			return ""
		}
	}
	return w
}

func contains(names []string, w string) bool {
	for _, n := range names {
		if n == w {
			return true
		}
	}
	return false
}
