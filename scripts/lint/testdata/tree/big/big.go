package big

var v0 = 0
var v1 = 1
var v2 = 2
var v3 = 3
var v4 = 4
var v5 = 5
var v6 = 6
var v7 = 7
var v8 = 8
var v9 = 9
var v10 = 10
var v11 = 11
var v12 = 12
var v13 = 13
var v14 = 14
var v15 = 15
var v16 = 16
var v17 = 17
var v18 = 18
var v19 = 19
var v20 = 20
var v21 = 21
var v22 = 22
