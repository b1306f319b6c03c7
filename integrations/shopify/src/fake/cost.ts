import type { DocumentNode, FieldNode, SelectionSetNode } from 'graphql';

/**
 * Shopify's calculated query cost, as its rate-limit page describes it: scalars and enums 0, an
 * object 1, a connection 2 plus the page size times the cost of one node, a mutation 10. Fragments
 * count what they select. This is the requested cost; the fake charges it and refunds nothing (the
 * real API refunds the difference once it knows the actual cost), which only makes it stricter.
 */
export function requestedCost(document: DocumentNode, variables: Record<string, unknown>): number {
  const fragments = new Map<string, SelectionSetNode>();
  for (const definition of document.definitions) {
    if (definition.kind === 'FragmentDefinition')
      fragments.set(definition.name.value, definition.selectionSet);
  }

  const argNumber = (field: FieldNode, name: string): number | undefined => {
    const arg = field.arguments?.find((a) => a.name.value === name);
    if (!arg) return undefined;
    if (arg.value.kind === 'IntValue') return Number(arg.value.value);
    if (arg.value.kind === 'Variable') {
      const value = variables[arg.value.name.value];
      return typeof value === 'number' ? value : undefined;
    }
    return undefined;
  };

  const setCost = (set: SelectionSetNode | undefined, seen: Set<string>): number => {
    if (!set) return 0;
    let total = 0;
    for (const selection of set.selections) {
      if (selection.kind === 'Field') total += fieldCost(selection, seen);
      else if (selection.kind === 'InlineFragment') total += setCost(selection.selectionSet, seen);
      else if (!seen.has(selection.name.value)) {
        total += setCost(fragments.get(selection.name.value), new Set([...seen, selection.name.value]));
      }
    }
    return total;
  };

  const fieldCost = (field: FieldNode, seen: Set<string>): number => {
    if (!field.selectionSet) return 0;
    if (field.name.value === 'pageInfo') return 0;
    const size = argNumber(field, 'first') ?? argNumber(field, 'last');
    if (size !== undefined) {
      // A connection: one node's cost, read from edges { node } or nodes, times the page size.
      let perNode = 0;
      for (const sel of field.selectionSet.selections) {
        if (sel.kind !== 'Field') continue;
        if (sel.name.value === 'nodes') perNode = Math.max(perNode, 1 + setCost(sel.selectionSet, seen));
        if (sel.name.value === 'edges') {
          for (const inner of sel.selectionSet?.selections ?? []) {
            if (inner.kind === 'Field' && inner.name.value === 'node') {
              perNode = Math.max(perNode, 1 + setCost(inner.selectionSet, seen));
            }
          }
        }
      }
      return 2 + size * perNode;
    }
    return 1 + setCost(field.selectionSet, seen);
  };

  let total = 0;
  for (const definition of document.definitions) {
    if (definition.kind !== 'OperationDefinition') continue;
    if (definition.operation === 'mutation') {
      total += 10 * definition.selectionSet.selections.length;
    } else {
      total += setCost(definition.selectionSet, new Set());
    }
  }
  return Math.max(1, total);
}

/** The leaky bucket of one app on one shop. */
export interface ThrottleStatus {
  maximumAvailable: number;
  currentlyAvailable: number;
  restoreRate: number;
}

export class CostBucket {
  readonly maximumAvailable: number;
  readonly restoreRate: number;
  private readonly now: () => number;
  private available: number;
  private at: number;

  constructor(maximumAvailable: number, restoreRate: number, now: () => number = () => performance.now()) {
    this.maximumAvailable = maximumAvailable;
    this.restoreRate = restoreRate;
    this.now = now;
    this.available = maximumAvailable;
    this.at = now();
  }

  private refill(): void {
    const t = this.now();
    this.available = Math.min(
      this.maximumAvailable,
      this.available + ((t - this.at) / 1000) * this.restoreRate,
    );
    this.at = t;
  }

  /** Takes `cost` when the bucket holds it; false (nothing taken) when it does not. */
  take(cost: number): boolean {
    this.refill();
    if (cost > this.available) return false;
    this.available -= cost;
    return true;
  }

  status(): ThrottleStatus {
    this.refill();
    return {
      maximumAvailable: this.maximumAvailable,
      currentlyAvailable: Math.floor(this.available),
      restoreRate: this.restoreRate,
    };
  }
}
