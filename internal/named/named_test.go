package named

import (
	"testing"
)

type color string

type size int

func TestRegistry(t *testing.T) {
	Register("red", color("#f00"))
	Register("green", color("#0f0"))
	Register("blue", color("#00f"))
	Register("small", size(1))

	tests := []struct {
		name   string
		want   color
		wantOK bool
	}{
		{"red", "#f00", true},
		{"GREEN", "#0f0", true},
		{"small", "", false}, // another type's name
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := Lookup[color](tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Lookup[color](%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
	if _, ok := Lookup[float64]("red"); ok {
		t.Error("Lookup of a type nothing registered found a value")
	}
	for _, tt := range []struct{ got, want string }{
		{OneOf[color](), "red, green or blue"},
		{OneOf[size](), "small"},
		{OneOf[float64](), ""},
	} {
		if tt.got != tt.want {
			t.Errorf("OneOf = %q, want %q", tt.got, tt.want)
		}
	}
	for _, name := range []string{"red", "Purple"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			Register(name, color("#x"))
		}()
	}
}
