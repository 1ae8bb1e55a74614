package host

import (
	"math"
	"reflect"
	"testing"
	"time"
)

// FuzzParseSetting: the settings' reader (a flag's or a variable's
// value) never panics on any text, refuses NaN and infinite numbers, and
// what it reads is written back by --help's form (fieldValue.String) as
// text it reads to the same value.
func FuzzParseSetting(f *testing.F) {
	for _, s := range []string{"", "5m", "off", "on", "true", "429,503", " 10 ", "0.5", "-1", "NaN", "+Inf", "1e309", "a,,b", "9223372036854775807", "1h0m0s", "http://a.example, http://b.example"} {
		f.Add(s)
	}
	types := []reflect.Type{
		reflect.TypeFor[time.Duration](), reflect.TypeFor[bool](), reflect.TypeFor[int](), reflect.TypeFor[int64](),
		reflect.TypeFor[float64](), reflect.TypeFor[string](), reflect.TypeFor[[]string](), reflect.TypeFor[[]int](),
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, typ := range types {
			v, err := parseSetting(typ, s, false)
			if err != nil {
				continue
			}
			if typ.Kind() == reflect.Float64 && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)) {
				t.Fatalf("%q read as %v: NaN and infinite numbers are refused", s, v)
			}
			field := reflect.New(typ).Elem()
			field.Set(v)
			text := (&fieldValue{v: field}).String()
			again, err := parseSetting(typ, text, false)
			if err != nil {
				t.Fatalf("%q read as %v (%s), written %q, which does not read: %v", s, v, typ, text, err)
			}
			if !reflect.DeepEqual(v.Interface(), again.Interface()) && !(typ.Kind() == reflect.Slice && v.Len() == 0 && again.Len() == 0) {
				t.Fatalf("%q read as %#v (%s), written %q, read back as %#v", s, v, typ, text, again)
			}
		}
	})
}
