// Package tracetest holds test helpers for the file formats: Fill sets
// every field of a row struct to a distinct non-zero value, so a
// round-trip test over a codec fails when a field is added to the struct
// and forgotten by the codec.
package tracetest

import (
	"fmt"
	"reflect"
)

// Fill sets every exported field of the struct *ptr (recursively through
// structs and slices) to a distinct non-zero value derived from seed:
// numbers count up, strings are "f<n>", bools are true, slices get three
// elements. Fields tagged parquet:"-" are left alone (not part of the
// file). It panics on a kind it does not know, so a new kind of field is
// noticed.
func Fill(ptr any, seed int) {
	n := seed
	fill(reflect.ValueOf(ptr).Elem(), &n)
}

func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("f%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 3, 3)
		for i := range 3 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("parquet") == "-" {
				continue
			}
			fill(v.Field(i), n)
		}
	default:
		panic(fmt.Sprintf("tracetest.Fill: %s fields are not handled", v.Type()))
	}
}

// Zero returns the names of the exported fields of the struct *ptr that
// hold their zero value (a filled struct has none).
func Zero(ptr any) []string {
	v := reflect.ValueOf(ptr).Elem()
	var out []string
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && f.Tag.Get("parquet") != "-" && v.Field(i).IsZero() {
			out = append(out, f.Name)
		}
	}
	return out
}
