// Statements name their parameters (:job); named() turns them into $1.. and remembers the
// order, so that a statement and its values cannot drift apart.

export interface Statement {
  readonly text: string;
  readonly names: readonly string[];
}

export function named(text: string): Statement {
  const names: string[] = [];
  const out = text.replace(/(?<!:):([a-z_]+)\b/g, (_, name: string) => {
    const index = names.includes(name) ? names.indexOf(name) : names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { text: out, names };
}
