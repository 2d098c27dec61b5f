package memberrbac

import (
	"net/http"
	"net/url"
	"strings"
)

// RequestPermission is the permission a request to a Kubernetes API server
// needs, read from its method and URL as the API server's request info
// reads them: /api/v1/... and /apis/GROUP/VERSION/..., an optional
// namespaces/NS/ before the resource, then a name and a subresource. Any
// other path is a non-resource request.
func RequestPermission(method string, u *url.URL) Permission {
	parts := splitPath(u.Path)
	var rest []string
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, rest = parts[1], parts[3:]
	default:
		return Permission{Verb: nonResourceVerb(method), Path: "/" + strings.Join(parts, "/")}
	}
	// The deprecated /watch/ prefix.
	watchPath := false
	if rest[0] == "watch" {
		watchPath, rest = true, rest[1:]
	}
	var ns string
	// namespaces/NS/RESOURCE...; namespaces/NS alone is the namespace itself.
	if len(rest) >= 3 && rest[0] == "namespaces" {
		ns, rest = rest[1], rest[2:]
	}
	if len(rest) == 0 {
		return Permission{Verb: nonResourceVerb(method), Path: u.Path}
	}
	p := Permission{Group: group, Resource: rest[0], Namespace: ns}
	named := len(rest) >= 2
	if len(rest) >= 3 {
		p.Resource += "/" + rest[2]
	}
	if p.Resource == "namespaces" && named {
		p.Namespace = rest[1] // as the API server's request info has it
	}
	p.Verb = resourceVerb(method, named, watchPath || isWatch(u.Query()))
	return p
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func isWatch(q url.Values) bool {
	w := q.Get("watch")
	return w == "true" || w == "1"
}

func resourceVerb(method string, named, watch bool) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch:
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(method)
}

func nonResourceVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	}
	return strings.ToLower(method)
}
