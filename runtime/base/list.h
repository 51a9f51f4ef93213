/*
 * base/list.h - an intrusive, circular, doubly linked list.
 *
 * A struct that lives on a list embeds a struct hvd_list node; the list
 * itself is one more node, the head, whose next is the first element and
 * prev the last.  An empty list (and a node on no list) points to itself,
 * so insertion and removal never test for NULL and a removed node can be
 * removed again harmlessly.  No allocation, no locking: the owner of the
 * list serialises access.
 */
#ifndef HVD_BASE_LIST_H
#define HVD_BASE_LIST_H

#include <stddef.h>

struct hvd_list {
	struct hvd_list *prev, *next;
};

/* The struct of type that holds node as its member. */
#define hvd_list_entry(node, type, member)                                     \
	((type *)(void *)((char *)(node) - offsetof(type, member)))

/* for (struct hvd_list *it = ...): it may be removed inside the loop. */
#define hvd_list_for_each_safe(it, tmp, head)                                  \
	for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head);          \
	     (it) = (tmp), (tmp) = (it)->next)

static inline void hvd_list_init(struct hvd_list *l)
{
	l->prev = l->next = l;
}

static inline int hvd_list_empty(const struct hvd_list *head)
{
	return head->next == head;
}

/* First / last element's node, NULL when the list is empty. */
static inline struct hvd_list *hvd_list_first(const struct hvd_list *head)
{
	return head->next == head ? NULL : head->next;
}

static inline struct hvd_list *hvd_list_last(const struct hvd_list *head)
{
	return head->prev == head ? NULL : head->prev;
}

static inline void hvd_list_insert_between(struct hvd_list *n,
					   struct hvd_list *prev,
					   struct hvd_list *next)
{
	n->prev = prev;
	n->next = next;
	prev->next = n;
	next->prev = n;
}

static inline void hvd_list_push_front(struct hvd_list *head,
				       struct hvd_list *n)
{
	hvd_list_insert_between(n, head, head->next);
}

static inline void hvd_list_push_back(struct hvd_list *head,
				      struct hvd_list *n)
{
	hvd_list_insert_between(n, head->prev, head);
}

static inline void hvd_list_remove(struct hvd_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	hvd_list_init(n);
}

/* Moves n (on this list or none) to the front. */
static inline void hvd_list_move_front(struct hvd_list *head,
				       struct hvd_list *n)
{
	hvd_list_remove(n);
	hvd_list_push_front(head, n);
}

#endif /* HVD_BASE_LIST_H */
