// Command forwardgen writes the code that repeats the backend contract
// method by method, from the interfaces in plugin/backend.go:
//
//   - plugin/forward_gen.go: Deferred's forwarders, Complete's answers for
//     the optional interfaces, Unimplemented's refusals;
//   - plugin/plugintest/fake_gen.go: Fake's function fields and methods;
//   - hostrm/link/calls_gen.go: the link's client methods and its
//     server's handler table;
//   - plugin/grpcplugin/internal/service/server_gen.go and remote_gen.go:
//     the gRPC service's adapters, one per RPC on each side (the backend's
//     server converting and calling plugin.Full, the host's plugin.Full
//     converting and calling the client). Generated because they are pure
//     repetition and because the server embeds
//     UnimplementedResourceManagerServiceServer: a method added to the
//     contract and the proto but forgotten here would compile and answer
//     Unimplemented at run time; generated, it cannot be forgotten, and a
//     proto message or a convert function missing for it fails the
//     build. The adapters follow one naming rule: RPC X takes
//     rmv1.XRequest and answers rmv1.XResponse, and convert has
//     FromXRequest/ToXRequest and, for a method that answers more than
//     an error, ToXResponse/FromXResponse. The conversions themselves
//     stay hand-written in package convert: each is a mapping of its own.
//     TestServiceMatchesContract holds the service's RPCs to the
//     contract's methods, one for one.
//
// It writes the bootstrap's plain-form codecs too, from another source,
// the descriptor of gopmi.shim.v1.Bootstrap (plain.go).
//
// A method's name for messages ("direct modex") and its name on the link
// ("direct-modex") come from its Go name; an optional interface's
// capability is the Cap constant whose comment names the interface. Run it
// from the module root (make generate); a test fails when a generated file
// is not current.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"unicode"
)

// method is one method of the contract.
type method struct {
	Name  string // DirectModex
	Iface string // the interface that declares it: Backend, Publisher, ...
	Req   string // the request type, "" for a method without one (GetInfo)
	Resp  string // the response type, "" when the method answers only an error
	Call  string // "direct modex": its name in messages
	Wire  string // "direct-modex": its name on the link
	Cap   string // the capability constant of an optional interface, "" for Backend
	Hand  bool   // Unimplemented has a hand-written method for it
}

// contract is what the generator reads from package plugin.
type contract struct {
	Methods []method
	Caps    []capability // in the order of Full's interfaces
}

type capability struct {
	Const   string // CapPublish
	Iface   string // Publisher
	Methods []method
}

func main() {
	root := flag.String("root", ".", "the module's root")
	check := flag.Bool("check", false, "report files that are not current instead of writing them")
	flag.Parse()
	files, err := generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forwardgen:", err)
		os.Exit(1)
	}
	stale := 0
	for path, src := range files {
		if *check {
			old, _ := os.ReadFile(path)
			if !bytes.Equal(old, src) {
				fmt.Fprintf(os.Stderr, "forwardgen: %s is not current: run make generate\n", path)
				stale++
			}
			continue
		}
		if err := os.WriteFile(path, src, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "forwardgen:", err)
			os.Exit(1)
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}

// generate returns every generated file, by path below root.
func generate(root string) (map[string][]byte, error) {
	c, err := read(filepath.Join(root, "plugin"))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for path, tmpl := range map[string]*template.Template{
		"plugin/forward_gen.go":                            pluginTmpl,
		"plugin/plugintest/fake_gen.go":                    fakeTmpl,
		"hostrm/link/calls_gen.go":                         linkTmpl,
		"plugin/grpcplugin/internal/service/server_gen.go": serverTmpl,
		"plugin/grpcplugin/internal/service/remote_gen.go": remoteTmpl,
	} {
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, c); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		src, err := format.Source(buf.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: gofmt: %w\n%s", path, err, buf.Bytes())
		}
		out[filepath.Join(root, path)] = src
	}
	plain, err := plainFiles(root)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, plain)
	return out, nil
}

// read parses package plugin's hand-written files.
func read(dir string) (*contract, error) {
	fset := token.NewFileSet()
	ifaces := map[string]*ast.InterfaceType{}
	capOf := map[string]string{} // interface -> Cap constant
	hand := map[string]bool{}    // Unimplemented's hand-written methods
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_gen.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							ifaces[s.Name.Name] = it
						}
					case *ast.ValueSpec:
						// CapPublish = "publish" // Publisher
						if len(s.Names) == 1 && strings.HasPrefix(s.Names[0].Name, "Cap") && s.Comment != nil {
							capOf[strings.TrimSpace(s.Comment.Text())] = s.Names[0].Name
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 && typeName(d.Recv.List[0].Type) == "Unimplemented" {
					hand[d.Name.Name] = true
				}
			}
		}
	}
	full := ifaces["Full"]
	if full == nil {
		return nil, fmt.Errorf("%s: no interface Full", dir)
	}
	c := &contract{}
	for _, emb := range full.Methods.List {
		iname := typeName(emb.Type)
		it := ifaces[iname]
		if len(emb.Names) != 0 || it == nil {
			return nil, fmt.Errorf("interface Full must embed interfaces of package plugin only; found %s", iname)
		}
		var capm capability
		if iname != "Backend" {
			capm = capability{Const: capOf[iname], Iface: iname}
			if capm.Const == "" {
				return nil, fmt.Errorf("optional interface %s has no Cap constant whose comment names it", iname)
			}
		}
		for _, f := range it.Methods.List {
			m, err := readMethod(iname, f)
			if err != nil {
				return nil, err
			}
			m.Cap = capm.Const
			m.Hand = hand[m.Name]
			c.Methods = append(c.Methods, m)
			capm.Methods = append(capm.Methods, m)
		}
		if iname != "Backend" {
			c.Caps = append(c.Caps, capm)
		}
	}
	return c, nil
}

// readMethod reads Name(ctx context.Context[, req *Req]) ([*Resp, ]error).
func readMethod(iface string, f *ast.Field) (method, error) {
	ft, ok := f.Type.(*ast.FuncType)
	if len(f.Names) != 1 || !ok {
		return method{}, fmt.Errorf("%s: only methods may be declared", iface)
	}
	m := method{Name: f.Names[0].Name, Iface: iface}
	bad := fmt.Errorf("%s.%s: want (ctx context.Context[, req *Request]) ([*Response, ]error)", iface, m.Name)
	params, results := fieldTypes(ft.Params), fieldTypes(ft.Results)
	if len(params) < 1 || len(params) > 2 || params[0] != "context.Context" || len(results) < 1 || len(results) > 2 || results[len(results)-1] != "error" {
		return method{}, bad
	}
	if len(params) == 2 {
		if !strings.HasPrefix(params[1], "*") {
			return method{}, bad
		}
		m.Req = params[1][1:]
	}
	if len(results) == 2 {
		if !strings.HasPrefix(results[0], "*") {
			return method{}, bad
		}
		m.Resp = results[0][1:]
	}
	words := splitCamel(m.Name)
	m.Call, m.Wire = strings.Join(words, " "), strings.Join(words, "-")
	return m, nil
}

// fieldTypes lists a field list's types, one per name.
func fieldTypes(fl *ast.FieldList) []string {
	var out []string
	if fl == nil {
		return nil
	}
	for _, f := range fl.List {
		n := max(len(f.Names), 1)
		for range n {
			out = append(out, typeName(f.Type))
		}
	}
	return out
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + typeName(e.X)
	case *ast.SelectorExpr:
		return typeName(e.X) + "." + e.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

// splitCamel splits "DirectModex" into "direct", "modex".
func splitCamel(s string) []string {
	var words []string
	start := 0
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			words = append(words, strings.ToLower(s[start:i]))
			start = i
		}
	}
	return append(words, strings.ToLower(s[start:]))
}

var funcs = template.FuncMap{
	// results is a method's result list, its types qualified by q.
	"results": func(m method, q string) string {
		if m.Resp == "" {
			return "error"
		}
		return "(*" + q + m.Resp + ", error)"
	},
	// zero is what precedes the error in a return.
	"zero": func(m method) string {
		if m.Resp == "" {
			return ""
		}
		return "nil, "
	},
}

const header = `// Code generated by plugin/internal/forwardgen from the interfaces in plugin/backend.go; DO NOT EDIT.
`

var pluginTmpl = template.Must(template.New("plugin").Funcs(funcs).Parse(header + `
package plugin

import "context"
{{range .Methods}}
// {{.Name}} forwards.
func (d Deferred) {{.Name}}(ctx context.Context{{if .Req}}, req *{{.Req}}{{end}}) {{results . ""}} {
	b, err := d.Resolve(ctx, "{{.Call}}")
	if err != nil {
		return {{zero .}}err
	}
	return b.{{.Name}}(ctx{{if .Req}}, req{{end}})
}
{{end}}
{{- range .Methods}}{{if .Cap}}
func (c *completed) {{.Name}}(ctx context.Context, req *{{.Req}}) {{results . ""}} {
	if b, ok := c.Backend.({{.Iface}}); ok {
		return b.{{.Name}}(ctx, req)
	}
	return {{zero .}}unsupported("{{.Call}}")
}
{{end}}{{end}}
{{- range .Methods}}{{if and .Req (not .Hand)}}
// {{.Name}} answers ErrNotSupported.
func (Unimplemented) {{.Name}}(context.Context, *{{.Req}}) {{results . ""}} {
	return {{zero .}}unsupported("{{.Call}}")
}
{{end}}{{end}}`))

var fakeTmpl = template.Must(template.New("fake").Funcs(funcs).Parse(header + `
package plugintest

import (
	"context"

	"github.com/gopmi/gopmi/plugin"
)

// Fake is a plugin.Full whose methods call the matching function field. A
// nil field answers an error wrapping plugin.ErrNotSupported, except
// GetInfoF, whose default answers DefaultInfo. Fake records nothing: tests
// capture what they need in their functions.
type Fake struct {
{{- range .Methods}}
	{{.Name}}F func(ctx context.Context{{if .Req}}, req *plugin.{{.Req}}{{end}}) {{results . "plugin."}}
{{- end}}
}

var _ plugin.Full = (*Fake)(nil)
{{range .Methods}}{{if .Req}}
// {{.Name}} calls {{.Name}}F.
func (f *Fake) {{.Name}}(ctx context.Context, req *plugin.{{.Req}}) {{results . "plugin."}} {
	if f.{{.Name}}F == nil {
		return {{zero .}}notSupported("{{.Call}}")
	}
	return f.{{.Name}}F(ctx, req)
}
{{end}}{{end}}
// capabilities are the optional interfaces' capabilities, each with
// whether f sets a field of its interface.
func (f *Fake) capabilities() []struct {
	name string
	set  bool
} {
	return []struct {
		name string
		set  bool
	}{
{{- range .Caps}}
		{plugin.{{.Const}}, {{range $i, $m := .Methods}}{{if $i}} || {{end}}f.{{$m.Name}}F != nil{{end}}},
{{- end}}
	}
}
`))

var linkTmpl = template.Must(template.New("link").Funcs(funcs).Parse(header + `
package link

import (
	"context"

	"github.com/gopmi/gopmi/plugin"
)

// handlers are the calls, by their wire names.
var handlers = map[string]handler{
{{- range .Methods}}
	"{{.Wire}}": {{if not .Req}}noRequest{{else if .Resp}}method{{else}}notice{{end}}(plugin.Full.{{.Name}}),
{{- end}}
}

var _ plugin.Full = remote{}
{{range .Methods}}
func (r remote) {{.Name}}(ctx context.Context{{if .Req}}, req *plugin.{{.Req}}{{end}}) {{results . "plugin."}} {
{{- if .Resp}}
	return call[plugin.{{.Resp}}](ctx, r.c, "{{.Call}}", "{{.Wire}}", {{if .Req}}req{{else}}struct{}{}{{end}})
{{- else}}
	_, err := call[struct{}](ctx, r.c, "{{.Call}}", "{{.Wire}}", {{if .Req}}req{{else}}struct{}{}{{end}})
	return err
{{- end}}
}
{{end}}`))

var serverTmpl = template.Must(template.New("server").Funcs(funcs).Parse(header + `
package service

import (
	"context"

	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/convert"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)
{{range .Methods}}
// {{.Name}} converts the request, calls the backend and converts its
// answer; an error travels as a status.
func (s *server) {{.Name}}(ctx context.Context, {{if .Req}}req{{else}}_{{end}} *rmv1.{{.Name}}Request) (*rmv1.{{.Name}}Response, error) {
{{- if .Resp}}
	resp, err := s.b.{{.Name}}(ctx{{if .Req}}, convert.From{{.Name}}Request(req){{end}})
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.To{{.Name}}Response(resp), nil
{{- else}}
	if err := s.b.{{.Name}}(ctx{{if .Req}}, convert.From{{.Name}}Request(req){{end}}); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.{{.Name}}Response{}, nil
{{- end}}
}
{{end}}`))

var remoteTmpl = template.Must(template.New("remote").Funcs(funcs).Parse(header + `
package service

import (
	"context"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/convert"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)
{{range .Methods}}
// {{.Name}} converts the request, calls the service and converts the
// answer or the error back.
func (r *remote) {{.Name}}(ctx context.Context{{if .Req}}, req *plugin.{{.Req}}{{end}}) {{results . "plugin."}} {
{{- if .Resp}}
	resp, err := call(ctx, r, "{{.Call}}", {{if .Req}}convert.To{{.Name}}Request(req){{else}}&rmv1.{{.Name}}Request{}{{end}}, r.c.{{.Name}})
	if err != nil {
		return nil, err
	}
	return convert.From{{.Name}}Response(resp), nil
{{- else}}
	_, err := call(ctx, r, "{{.Call}}", {{if .Req}}convert.To{{.Name}}Request(req){{else}}&rmv1.{{.Name}}Request{}{{end}}, r.c.{{.Name}})
	return err
{{- end}}
}
{{end}}`))
