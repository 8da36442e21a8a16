module github.com/formica-run/formica

go 1.26
