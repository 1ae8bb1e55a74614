// Package named holds the choices the binaries name on their command
// lines (the worker's convention presets and webhook verifiers), each
// registered by the package that declares it, in that package's init.
// Adding a choice is then a change to that package alone: the flag that
// names it, its help and its error messages read the names here, and no
// exported lookup is needed in the public API for a binary of this
// repository.
package named

import (
	"fmt"
	"reflect"
	"strings"
)

// tables holds the names and values registered, by the values' type.
var tables = map[reflect.Type]*table{}

type table struct {
	names  []string
	values map[string]any
}

// Register adds v under name among the choices of type T (lowercase names;
// the first registered is listed first). Call it from an init function:
// registering a name twice panics.
func Register[T any](name string, v T) {
	k := reflect.TypeFor[T]()
	t := tables[k]
	if t == nil {
		t = &table{values: map[string]any{}}
		tables[k] = t
	}
	if _, twice := t.values[name]; twice || name != strings.ToLower(name) {
		panic(fmt.Sprintf("named: %s %q registered twice, or not lowercase", k, name))
	}
	t.names = append(t.names, name)
	t.values[name] = v
}

// Lookup returns the choice of type T registered under name, in any case.
func Lookup[T any](name string) (T, bool) {
	v, ok := tables[reflect.TypeFor[T]()].lookup(strings.ToLower(name))
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

func (t *table) lookup(name string) (any, bool) {
	if t == nil {
		return nil, false
	}
	v, ok := t.values[name]
	return v, ok
}

// Names returns the names of the choices of type T, in the order
// registered.
func Names[T any]() []string {
	if t := tables[reflect.TypeFor[T]()]; t != nil {
		return append([]string(nil), t.names...)
	}
	return nil
}

// OneOf lists the names of the choices of type T for a help text or an
// error message: "a", "a or b", "a, b or c".
func OneOf[T any]() string { return List(Names[T]()...) }

// List lists names for a help text or an error message: "a", "a or b",
// "a, b or c".
func List(names ...string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
