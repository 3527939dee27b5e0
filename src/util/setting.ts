// A resolved value and where it came from (a flag, a variable, `file:line`), for -v.
export interface Setting {
  readonly value: string;
  readonly from: string;
}
