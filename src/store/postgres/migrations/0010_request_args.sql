-- A request's args: a one-dimensional array without NULL elements, as a command line carries
-- them (text[] takes both: a NULL reached the command as the word "null", {{a,b}} as "a,b").
-- NOT VALID: a log that already holds such a row still migrates; a run refuses that request.
-- CASE, because array_position() fails on a multi-dimensional array.
ALTER TABLE {{schema}}.requests ADD CONSTRAINT requests_args_strings CHECK (
  CASE WHEN array_ndims(args) IS NULL THEN true
       WHEN array_ndims(args) > 1 THEN false
       ELSE array_position(args, NULL) IS NULL END) NOT VALID;
