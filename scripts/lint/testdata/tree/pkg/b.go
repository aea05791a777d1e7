package pkg

var w = 1
var w0 = 0
var w1 = 1
var w2 = 2
var w3 = 3
var w4 = 4
var w5 = 5
var w6 = 6
var w7 = 7
var w8 = 8
var w9 = 9
var w10 = 10
var w11 = 11
var w12 = 12
var w13 = 13
var w14 = 14
